// The Word check's copy buttons: each copies its tag to paste into the .docx, and says so.
(function () {
  "use strict";
  function copied(button) {
    var was = button.textContent;
    button.textContent = button.getAttribute("data-copied") || "✓";
    setTimeout(function () { button.textContent = was; }, 1500);
  }
  function byHand(text, button) {
    // Where the clipboard API is missing or refused (an http page, a browser asking permission).
    var field = document.createElement("textarea");
    field.value = text;
    field.setAttribute("readonly", "");
    document.body.appendChild(field);
    field.select();
    document.execCommand("copy");
    field.remove();
    button.focus();
    copied(button);
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button.copy-tag");
    if (!button) return;
    var text = button.getAttribute("data-copy");
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(function () { copied(button); }, function () { byHand(text, button); });
    } else {
      byHand(text, button);
    }
  });
})();
