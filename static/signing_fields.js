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
