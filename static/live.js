// Live fragments: an element that polls (hx-trigger="every …") carries its fragment's ETag in data-etag and sends
// it back as If-None-Match; the server answers 304 while nothing changed, and the page keeps what it shows.
(function () {
  document.addEventListener("htmx:configRequest", function (e) {
    var tag = e.detail.elt.getAttribute && e.detail.elt.getAttribute("data-etag");
    if (tag) e.detail.headers["If-None-Match"] = tag;
  });
  document.addEventListener("htmx:beforeSwap", function (e) {
    if (!e.detail.requestConfig || !e.detail.requestConfig.elt.hasAttribute("data-live")) return;
    if (e.detail.xhr.status === 304) { e.detail.shouldSwap = false; return; }
    // Someone typing in a form of the fragment keeps it: the next poll brings the change once they are done.
    var focused = document.activeElement;
    var target = e.detail.target;
    if (focused && target && target.contains(focused) && focused.matches("input, textarea, select")) e.detail.shouldSwap = false;
  });
})();
