/* Draws every element with data-figure="<json_script id>" with plotly.js (served by agentkb
 * itself: observability/staticfiles.py). A bar whose customdata holds a URL opens it on click:
 * the invocation list filtered to what the bar counts. Sets data-drawn="1" once drawn (the
 * browser test waits for it).
 *
 * plotly.js is fetched only once the page has loaded (the script tag's data-plotly names it):
 * compiling its 4.8 MB takes most of a second on a slow machine, and the page's numbers and
 * tables do not need it. */
(function () {
  "use strict";

  var self = document.currentScript;

  function draw(el) {
    var source = document.getElementById(el.dataset.figure);
    if (!source) { return; }
    var figure = JSON.parse(source.textContent);
    var config = {
      displaylogo: false,
      responsive: true,
      // The mode bar covers the titles of these small charts; zooming is not what they are for.
      displayModeBar: false,
    };
    var drawn = Plotly.newPlot(el, figure.data, figure.layout, config).then(function () {
      el.dataset.drawn = "1";
    });
    el.on("plotly_click", function (event) {
      var point = event.points && event.points[0];
      if (point && typeof point.customdata === "string" && point.customdata) {
        window.location.href = point.customdata;
      }
    });
    return drawn;
  }

  function failed() {
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      el.textContent = "plotly.js did not load: run collectstatic or check STATIC_URL.";
    });
  }

  function drawAll() {
    window.okbChartsStartAt = performance.now();
    if (typeof Plotly === "undefined") {
      failed();
      return;
    }
    var drawn = Array.prototype.map.call(document.querySelectorAll("[data-figure]"), draw);
    // When the last chart is drawn (bench/pages.py reads it).
    Promise.all(drawn).then(function () {
      window.okbChartsDrawnAt = performance.now();
    });
  }

  function loadPlotly() {
    if (!document.querySelector("[data-figure]")) { return; }
    if (typeof Plotly !== "undefined") { drawAll(); return; }
    var url = self && self.dataset.plotly;
    if (!url) { failed(); return; }
    var script = document.createElement("script");
    script.src = url;
    script.onload = drawAll;
    script.onerror = failed;
    document.head.appendChild(script);
  }

  // After the load event (a script added then does not hold it back) and the first paint.
  function afterLoad() {
    window.requestAnimationFrame(function () { window.setTimeout(loadPlotly, 0); });
  }

  if (document.readyState === "complete") {
    afterLoad();
  } else {
    window.addEventListener("load", afterLoad);
  }

  // Custom range fields only matter when "Custom" is chosen.
  document.addEventListener("change", function (event) {
    if (event.target && event.target.name === "range") {
      var custom = event.target.value === "custom";
      document.querySelectorAll(".okb-custom-range").forEach(function (el) {
        el.hidden = !custom;
      });
    }
  });
})();
