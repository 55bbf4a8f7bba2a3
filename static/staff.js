// Small behaviours of the staff pages, wired here instead of inline handlers, which the CSP forbids.
(function () {
  // <select data-autosubmit>: choosing an option sends its form (language, filters).
  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("[data-autosubmit]") && e.target.form) e.target.form.submit();
  });
  // <input data-picks="select-id" data-pick-value="v">: typing in it chooses option v of that select
  // (an address typed beside "who gets the notices" means "another address").
  document.addEventListener("input", function (e) {
    var id = e.target.getAttribute && e.target.getAttribute("data-picks");
    var select = id && document.getElementById(id);
    if (select && e.target.value) select.value = e.target.getAttribute("data-pick-value");
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
