// Row selection for the recipients table: "select this page" and "select all N matching" (resolved on the server).
(function () {
  function table() { return document.getElementById("table"); }
  function update() {
    var t = table(); if (!t) return;
    var boxes = t.querySelectorAll(".row-check");
    var checked = t.querySelectorAll(".row-check:checked").length;
    var bar = document.getElementById("selection-bar");
    var flag = document.getElementById("select-all-flag");
    var all = flag && flag.value === "1";
    if (bar) bar.hidden = checked === 0 && !all;
    var count = document.getElementById("selection-count");
    if (count) count.textContent = all ? "" : checked + " / " + boxes.length;
    var link = document.getElementById("select-all-matching");
    var done = document.getElementById("all-selected");
    if (link) link.hidden = all || checked < boxes.length || boxes.length === 0;
    if (done) done.hidden = !all;
  }
  document.addEventListener("change", function (e) {
    var t = table(); if (!t || !t.contains(e.target)) return;
    if (e.target.id === "check-page") {
      t.querySelectorAll(".row-check").forEach(function (b) { b.checked = e.target.checked; });
    }
    if (!e.target.checked) { var flag = document.getElementById("select-all-flag"); if (flag) flag.value = "0"; }
    update();
  });
  document.addEventListener("click", function (e) {
    if (e.target.id !== "select-all-matching") return;
    document.getElementById("select-all-flag").value = "1";
    table().querySelectorAll(".row-check, #check-page").forEach(function (b) { b.checked = true; });
    update();
  });
  document.addEventListener("htmx:afterSwap", update);
  document.addEventListener("DOMContentLoaded", update);
})();
