// The placement editor of PDF templates (templates/doc_templates/place.html): drag on a page image to draw a
// box, drag a box to move it, its corner to resize it (or, without a mouse, the arrow keys on the box's "Move"
// button, with Shift to resize); each box names a column and a font size. Boxes are kept
// as fractions of the page, so the images may be any size, and sent as PDF points (y upwards) in #boxes-json. The
// form's own fields are outlined, each in the colour of the party its select gives it to.
(function () {
  "use strict";
  var form = document.getElementById("place-form");
  if (!form) return;
  var hidden = document.getElementById("boxes-json");
  var list = document.getElementById("box-list");
  var rowTemplate = document.getElementById("box-row");
  var empty = document.getElementById("no-boxes");
  var pages = Array.prototype.slice.call(form.querySelectorAll(".pdf-page"));
  var pageLabel = form.getAttribute("data-page-label");
  var boxes = [];
  var MIN_PX = 8;
  // How far one arrow key moves or resizes a box, as a fraction of its page.
  var STEP = 0.005;
  var ARROWS = {ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1]};
  // A party's signature: "signature" (the row's person) or "signature_<party>".
  var SIGNATURE = /^signature(_[a-z0-9_]+)?$/;

  function geometry(page) {
    var d = pages[page].dataset;
    return {left: +d.left, bottom: +d.bottom, width: +d.width, height: +d.height};
  }
  function clamp(v) { return Math.min(1, Math.max(0, v)); }
  function fromPoints(b) {
    var g = geometry(b.page);
    return {page: b.page, fx: (b.x - g.left) / g.width, fy: 1 - (b.y + b.h - g.bottom) / g.height,
            fw: b.w / g.width, fh: b.h / g.height, name: b.name || "", size: b.font_size || ""};
  }
  function toPoints(b) {
    var g = geometry(b.page);
    var r = function (v) { return Math.round(v * 100) / 100; };
    return {name: b.name.trim(), page: b.page, x: r(g.left + b.fx * g.width), y: r(g.bottom + (1 - b.fy - b.fh) * g.height),
            w: r(b.fw * g.width), h: r(b.fh * g.height), font_size: +b.size || 0};
  }
  function frame(el, b) {
    el.style.left = (b.fx * 100) + "%";
    el.style.top = (b.fy * 100) + "%";
    el.style.width = (b.fw * 100) + "%";
    el.style.height = (b.fh * 100) + "%";
  }
  function show(b) {
    frame(b.el, b);
    b.label.textContent = b.name || "?";
    b.el.classList.toggle("is-signature", SIGNATURE.test(b.name.trim()));
  }
  function store() {
    hidden.value = JSON.stringify(boxes.map(toPoints));
    empty.hidden = boxes.length > 0;
  }
  function select(b) {
    boxes.forEach(function (o) {
      o.el.classList.toggle("is-selected", o === b);
      o.row.classList.toggle("is-selected", o === b);
    });
  }
  function outline(b) {
    var el = document.createElement("div");
    el.className = "pdf-box";
    b.label = document.createElement("span");
    b.label.className = "pdf-box-label";
    var handle = document.createElement("span");
    handle.className = "pdf-box-handle";
    el.appendChild(b.label);
    el.appendChild(handle);
    pages[b.page].appendChild(el);
    b.el = el;
    el.addEventListener("pointerdown", function (e) { drag(e, b, e.target === handle); });
    return el;
  }
  function listRow(b) {
    var row = rowTemplate.content.firstElementChild.cloneNode(true);
    var name = row.querySelector("[data-role=name]");
    var size = row.querySelector("[data-role=size]");
    row.querySelector(".box-page").textContent = pageLabel + " " + (b.page + 1);
    name.value = b.name;
    size.value = b.size;
    name.addEventListener("input", function () { b.name = name.value; show(b); store(); });
    size.addEventListener("input", function () { b.size = size.value; store(); });
    name.addEventListener("focus", function () { select(b); });
    var mover = row.querySelector("[data-role=move]");
    mover.addEventListener("focus", function () { select(b); });
    mover.addEventListener("click", function () { select(b); b.el.scrollIntoView({block: "center"}); });
    mover.addEventListener("keydown", function (e) { nudge(e, b); });
    row.querySelector("[data-role=remove]").addEventListener("click", function () {
      b.el.remove();
      row.remove();
      boxes.splice(boxes.indexOf(b), 1);
      store();
    });
    list.appendChild(row);
    b.row = row;
    b.nameInput = name;
  }
  function add(b, focus) {
    if (!b.el) outline(b);
    listRow(b);
    boxes.push(b);
    show(b);
    store();
    select(b);
    if (focus) b.nameInput.focus();
  }
  // Move (or resize, from the corner handle) a box with the pointer, within its page.
  function drag(e, b, resize) {
    if (e.button !== 0) return;
    e.preventDefault();
    e.stopPropagation();
    select(b);
    var rect = pages[b.page].getBoundingClientRect();
    var start = {x: e.clientX, y: e.clientY, fx: b.fx, fy: b.fy, fw: b.fw, fh: b.fh};
    b.el.setPointerCapture(e.pointerId);
    function move(ev) {
      var dx = (ev.clientX - start.x) / rect.width, dy = (ev.clientY - start.y) / rect.height;
      if (resize) {
        b.fw = Math.max(MIN_PX / rect.width, Math.min(1 - b.fx, start.fw + dx));
        b.fh = Math.max(MIN_PX / rect.height, Math.min(1 - b.fy, start.fh + dy));
      } else {
        b.fx = Math.min(1 - b.fw, clamp(start.fx + dx));
        b.fy = Math.min(1 - b.fh, clamp(start.fy + dy));
      }
      show(b);
    }
    function up() {
      b.el.removeEventListener("pointermove", move);
      store();
      b.nameInput.focus();
    }
    b.el.addEventListener("pointermove", move);
    b.el.addEventListener("pointerup", up, {once: true});
    b.el.addEventListener("pointercancel", up, {once: true});
  }
  // The keyboard's way to drag: an arrow key moves the box a step, with Shift it moves its far corner.
  function nudge(e, b) {
    var d = ARROWS[e.key];
    if (!d || e.altKey || e.ctrlKey || e.metaKey) return;
    e.preventDefault();
    var rect = pages[b.page].getBoundingClientRect();
    if (e.shiftKey) {
      b.fw = Math.max(MIN_PX / rect.width, Math.min(1 - b.fx, b.fw + d[0] * STEP));
      b.fh = Math.max(MIN_PX / rect.height, Math.min(1 - b.fy, b.fh + d[1] * STEP));
    } else {
      b.fx = Math.min(1 - b.fw, clamp(b.fx + d[0] * STEP));
      b.fy = Math.min(1 - b.fh, clamp(b.fy + d[1] * STEP));
    }
    show(b);
    store();
  }
  // Draw a new box: press on the page, drag to the opposite corner, release.
  pages.forEach(function (page, index) {
    if (page.classList.contains("is-rotated")) return;
    page.addEventListener("pointerdown", function (e) {
      if (e.button !== 0 || e.target.closest(".pdf-box")) return;
      e.preventDefault();
      var rect = page.getBoundingClientRect();
      var x0 = clamp((e.clientX - rect.left) / rect.width), y0 = clamp((e.clientY - rect.top) / rect.height);
      var b = {page: index, fx: x0, fy: y0, fw: 0, fh: 0, name: "", size: 11};
      var el = outline(b);
      el.classList.add("is-drawing");
      page.setPointerCapture(e.pointerId);
      function move(ev) {
        var x = clamp((ev.clientX - rect.left) / rect.width), y = clamp((ev.clientY - rect.top) / rect.height);
        b.fx = Math.min(x0, x); b.fy = Math.min(y0, y); b.fw = Math.abs(x - x0); b.fh = Math.abs(y - y0);
        frame(el, b);
      }
      function up(ev) {
        move(ev);
        page.removeEventListener("pointermove", move);
        el.classList.remove("is-drawing");
        if (b.fw * rect.width < MIN_PX || b.fh * rect.height < MIN_PX) { el.remove(); return; }
        add(b, true);
      }
      page.addEventListener("pointermove", move);
      page.addEventListener("pointerup", up, {once: true});
    });
  });
  // Without a pointer (keyboard, screen reader): a box on page 1, to be named and moved.
  document.getElementById("add-box").addEventListener("click", function () {
    add({page: 0, fx: 0.1, fy: 0.1, fw: 0.35, fh: 0.03, name: "", size: 11}, true);
  });
  // Outlines of the PDF's own form fields, in the colour of the party each is given to (#form-field-list): a
  // field's type shows while it is a party's field, its column while it is a column's.
  var outlines = {};
  JSON.parse(form.getAttribute("data-fields") || "[]").forEach(function (f) {
    var b = fromPoints(f), el = document.createElement("div");
    el.className = "pdf-field";
    el.textContent = f.name;
    el.title = f.name;
    frame(el, b);
    pages[f.page].appendChild(el);
    (outlines[f.name] = outlines[f.name] || []).push(el);
  });
  Array.prototype.forEach.call(document.querySelectorAll(".form-field-row"), function (row) {
    var use = row.querySelector("[data-role=use]");
    var name = row.getAttribute("data-name");
    function shown() {
      var option = use.options[use.selectedIndex], kind = use.value.split(":")[0];
      row.querySelector("[data-for=field]").hidden = kind !== "field";
      row.querySelector("[data-for=column]").hidden = kind !== "column";
      (outlines[name] || []).forEach(function (el) {
        var colour = option.getAttribute("data-colour");
        el.classList.toggle("is-assigned", !!colour);
        el.style.setProperty("--party", colour || "");
        el.textContent = colour ? name + " · " + option.getAttribute("data-label") : name;
      });
    }
    use.addEventListener("change", shown);
    use.addEventListener("focus", function () {
      (outlines[name] || []).forEach(function (el) { el.scrollIntoView({block: "nearest"}); });
    });
    shown();
  });
  JSON.parse(form.getAttribute("data-boxes") || "[]").forEach(function (saved) { add(fromPoints(saved), false); });
  select(null);
  store();
})();
