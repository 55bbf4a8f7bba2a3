// Small behaviours of the staff pages, wired here instead of inline handlers, which the CSP forbids.
(function () {
  // <select data-autosubmit>: choosing an option sends its form (language, filters).
  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("[data-autosubmit]") && e.target.form) e.target.form.submit();
  });
  // <form data-confirm="question">: asks before sending.
  document.addEventListener("submit", function (e) {
    var question = e.target.getAttribute && e.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) e.preventDefault();
  });
  // <button data-clear="id">: empties that element (closes a side panel).
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("[data-clear]");
    if (!button) return;
    var target = document.getElementById(button.getAttribute("data-clear"));
    if (target) target.innerHTML = "";
  });
})();
