// Glue for the signature pad on /sign/<token> (a static file: the page's CSP allows no inline script).
(function () {
  "use strict";
  var canvas = document.getElementById("signature-pad");
  var form = document.getElementById("sign-form");
  if (!canvas || !form || typeof window.SignaturePad !== "function") { return; }
  document.getElementById("pad-box").hidden = false;
  var pad = new window.SignaturePad(canvas, { minWidth: 0.8, maxWidth: 2.6, penColor: "#1d2430" });
  // The page came back with a message: the drawing sent with the form is drawn again, and sent again unless cleared.
  var kept = document.getElementById("signature").value || null;

  // Match the canvas to its CSS size and the screen's pixel ratio, keeping what was drawn.
  function resize() {
    var ratio = Math.max(window.devicePixelRatio || 1, 1);
    var strokes = pad.toData();
    canvas.width = canvas.offsetWidth * ratio;
    canvas.height = canvas.offsetHeight * ratio;
    canvas.getContext("2d").scale(ratio, ratio);
    pad.clear();
    if (strokes.length) { pad.fromData(strokes); }
    else if (kept) { pad.fromDataURL(kept, { ratio: ratio, width: canvas.offsetWidth, height: canvas.offsetHeight }); }
  }
  window.addEventListener("resize", resize);
  resize();

  document.getElementById("pad-clear").addEventListener("click", function () {
    pad.clear();
    kept = null;
    var note = document.getElementById("pad-kept");
    if (note) { note.hidden = true; }
  });
  form.addEventListener("submit", function () {
    var drawn = pad.toData().length > 0;
    document.getElementById("signature").value = drawn ? pad.toDataURL("image/png") : (kept || "");
    document.getElementById("sign-button").disabled = true;
  });
}());
