// The numbered markers of the signer's fields, laid over the page images at their places (a static file: the
// page's CSP allows no inline script or style). Without it the markers stay hidden; the numbered form still works.
(function () {
  "use strict";
  var markers = document.querySelectorAll(".field-marker[data-place]");
  for (var i = 0; i < markers.length; i++) {
    var place = markers[i].getAttribute("data-place").split(" ").map(Number);
    var box = markers[i].style;
    box.left = place[0] + "%";
    box.top = place[1] + "%";
    box.width = place[2] + "%";
    box.height = place[3] + "%";
    markers[i].classList.add("placed");
  }
}());

// A field shown only when another of the signer's fields holds a value (its condition, as the server checks it:
// numbers as numbers, dates as dates, other text without regard to case). A hidden field's input is disabled, so
// it is neither sent nor required; without this script every field shows, with its condition in words, and the
// server drops what does not apply.
(function () {
  "use strict";
  var entries = document.querySelectorAll(".field-entry[data-when-field]");
  if (!entries.length) { return; }

  function number(text) {
    var digits = text.replace(/\s/g, "");
    digits = digits.indexOf(".") >= 0 ? digits.replace(/,/g, "") : digits.replace(/,/g, ".");
    if (!/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(digits)) { return null; }
    var found = Number(digits);
    return isFinite(found) ? found : null;
  }

  function date(text) {
    return /^\d{4}-\d{2}-\d{2}$/.test(text.trim()) ? text.trim() : null;
  }

  function valueOf(input) {
    if (input.type === "checkbox") { return input.checked ? "true" : ""; }  // as the server stores it
    if (input.type === "file") { return input.files && input.files.length ? input.files[0].name : ""; }
    return input.value.trim();
  }

  function holds(operator, value, expected) {
    if (operator === "filled") { return value !== ""; }
    if (value === "") { return false; }
    var a = number(value), b = number(expected);
    if (operator === "equals") {
      if (a !== null && b !== null) { return a === b; }
      return value.toLowerCase() === expected.trim().toLowerCase();
    }
    if (operator === "greater_than") {
      if (a !== null && b !== null) { return a > b; }
      var d = date(value), e = date(expected);
      return d !== null && e !== null && d > e;
    }
    return false;
  }

  function show(entry, shown) {
    entry.hidden = !shown;
    var inputs = entry.querySelectorAll("input, select, textarea");
    for (var i = 0; i < inputs.length; i++) {
      if (!inputs[i].hasAttribute("data-locked")) { inputs[i].disabled = !shown; }
    }
    var id = inputs.length ? inputs[0].id : "";
    var markers = document.querySelectorAll('.field-marker[href="#' + id + '"]');
    for (var m = 0; m < markers.length; m++) { markers[m].hidden = !shown; }
  }

  function update() {
    // A chain (a field shown by a field shown by another) settles in as many rounds as it is long.
    for (var round = 0; round <= entries.length; round++) {
      var changed = false;
      for (var i = 0; i < entries.length; i++) {
        var entry = entries[i];
        var source = document.getElementById(entry.getAttribute("data-when-field"));
        var sourceEntry = source && source.closest(".field-entry");
        var value = source && !(sourceEntry && sourceEntry.hidden) ? valueOf(source) : "";
        var shown = holds(entry.getAttribute("data-when-operator"), value, entry.getAttribute("data-when-value"));
        if (entry.hidden === shown) { show(entry, shown); changed = true; }
      }
      if (!changed) { break; }
    }
  }

  var form = entries[0].closest("form");
  form.addEventListener("input", update);
  form.addEventListener("change", update);
  update();
}());
