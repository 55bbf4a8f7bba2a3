// Small behaviours of the staff pages, wired here instead of inline handlers, which the CSP forbids.
(function () {
  // <select data-autosubmit>: choosing an option sends its form (language, filters).
  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("[data-autosubmit]") && e.target.form) e.target.form.submit();
  });
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
