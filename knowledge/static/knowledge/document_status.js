/* The document list and page refresh each document's status by themselves while any is pending
 * or indexing: a poll of status.json every two seconds, no page reload. Elements carry
 * data-doc-id and data-doc-status; the poll stops once nothing is in progress. */
(function () {
  "use strict";
  var ACTIVE = ["PENDING", "INDEXING"];
  var COLOURS = {INDEXED: "#2e7d32", FAILED: "#c62828", INDEXING: "#1565c0", PENDING: "#6d6d6d"};

  function badges() { return Array.from(document.querySelectorAll("[data-doc-id]")); }

  function poll() {
    var active = badges().filter(function (el) { return ACTIVE.indexOf(el.dataset.docStatus) >= 0; });
    if (!active.length) { return; }
    var root = document.querySelector("meta[name=doc-status-url]").content;
    var ids = active.map(function (el) { return el.dataset.docId; }).join(",");
    fetch(root + "?ids=" + ids, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) {
        if (body && body.documents) {
          active.forEach(function (el) {
            var doc = body.documents[el.dataset.docId];
            if (!doc) { return; }
            el.dataset.docStatus = doc.status;
            el.style.color = COLOURS[doc.status] || "inherit";
            el.textContent = doc.label + (doc.error ? ": " + doc.error : "");
            el.title = doc.error || "";
          });
        }
        window.setTimeout(poll, 2000);
      })
      .catch(function () { window.setTimeout(poll, 5000); });
  }

  function start() { window.setTimeout(poll, 2000); }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
