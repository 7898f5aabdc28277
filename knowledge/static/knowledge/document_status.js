/* The document list and page refresh each document's status by themselves while any is pending
 * or indexing: a poll of status.json every two seconds, no page reload. Elements carry
 * data-doc-id and data-doc-status (data-doc-show=label: the label alone); the change page's error
 * and chunk count fields (data-doc-error-of, data-doc-chunks-of) follow. The poll stops once
 * nothing is in progress. */
(function () {
  "use strict";
  var ACTIVE = ["PENDING", "INDEXING"];
  var COLOURS = {INDEXED: "#2e7d32", FAILED: "#c62828", INDEXING: "#1565c0", PENDING: "#6d6d6d"};

  function badges() { return Array.from(document.querySelectorAll("[data-doc-id]")); }

  function poll() {
    var active = badges().filter(function (el) { return ACTIVE.indexOf(el.dataset.docStatus) >= 0; });
    if (!active.length) { return; }
    var root = document.querySelector("meta[name=doc-status-url]").content;
    var ids = active.map(function (el) { return el.dataset.docId; })
      .filter(function (id, i, all) { return all.indexOf(id) === i; }).join(",");
    fetch(root + "?ids=" + ids, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) {
        if (body && body.documents) {
          active.forEach(function (el) {
            var doc = body.documents[el.dataset.docId];
            if (!doc) { return; }
            el.dataset.docStatus = doc.status;
            if (el.dataset.docShow === "label") {  // the change page's status field: the label alone
              el.textContent = doc.label;
              return;
            }
            el.style.color = COLOURS[doc.status] || "inherit";
            el.textContent = doc.label + (doc.error ? ": " + doc.error : "");
            el.title = doc.error || "";
          });
          // The change page's error and chunk count fields follow the same answer.
          document.querySelectorAll("[data-doc-error-of]").forEach(function (el) {
            var doc = body.documents[el.dataset.docErrorOf];
            // status.json sends only a FAILED document's error: a pending one's "will retry" stays.
            if (doc && ACTIVE.indexOf(doc.status) < 0) { el.textContent = doc.error || "-"; }
          });
          document.querySelectorAll("[data-doc-chunks-of]").forEach(function (el) {
            var doc = body.documents[el.dataset.docChunksOf];
            if (doc) { el.textContent = String(doc.chunk_count); }
          });
        }
        window.setTimeout(poll, 2000);
      })
      .catch(function () { window.setTimeout(poll, 5000); });
  }

  function start() { window.setTimeout(poll, 2000); }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
