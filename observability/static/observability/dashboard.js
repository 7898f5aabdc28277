/* Draws every element with data-figure="<json_script id>" with plotly.js (served by agentkb
 * itself: observability/staticfiles.py). A bar whose customdata holds a URL opens it on click:
 * the invocation list filtered to what the bar counts. Sets data-drawn="1" once drawn (the
 * browser test waits for it). */
(function () {
  "use strict";

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
    Plotly.newPlot(el, figure.data, figure.layout, config).then(function () {
      el.dataset.drawn = "1";
    });
    el.on("plotly_click", function (event) {
      var point = event.points && event.points[0];
      if (point && typeof point.customdata === "string" && point.customdata) {
        window.location.href = point.customdata;
      }
    });
  }

  function start() {
    if (typeof Plotly === "undefined") {
      document.querySelectorAll("[data-figure]").forEach(function (el) {
        el.textContent = "plotly.js did not load: run collectstatic or check STATIC_URL.";
      });
      return;
    }
    document.querySelectorAll("[data-figure]").forEach(draw);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
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
