// Small behaviours of the staff pages, wired here instead of inline handlers, which the CSP forbids.
(function () {
  // <select data-autosubmit>: choosing an option sends its form (language, filters).
  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("[data-autosubmit]") && e.target.form) e.target.form.submit();
  });
  // On a phone tables stack into a card per row (app.css): each cell is labelled with its column's header, here
  // once the page is read and again after every swap (the recipients table, the file check).
  function labelCells() {
    document.querySelectorAll("main table").forEach(function (table) {
      var heads = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
        return th.textContent.trim();
      });
      if (!heads.length) return;
      Array.prototype.forEach.call(table.tBodies, function (body) {
        Array.prototype.forEach.call(body.rows, function (row) {
          var column = 0;
          Array.prototype.forEach.call(row.cells, function (cell) {
            if (!cell.hasAttribute("data-label") && cell.colSpan === 1) cell.setAttribute("data-label", heads[column] || "");
            column += cell.colSpan;
          });
        });
      });
    });
  }
  document.addEventListener("DOMContentLoaded", labelCells);
  document.addEventListener("htmx:afterSettle", labelCells);
  // <button data-clear="id" [data-focus-back="selector"]>: empties that element (closes a side panel) and
  // gives the focus back to where the panel was opened from.
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("[data-clear]");
    if (!button) return;
    var target = document.getElementById(button.getAttribute("data-clear"));
    if (target) target.innerHTML = "";
    var back = button.getAttribute("data-focus-back");
    var focus = back && document.querySelector(back);
    if (focus) focus.focus();
  });
})();
