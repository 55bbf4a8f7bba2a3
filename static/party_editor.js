// The template page's parties and signing order: add and remove parties, and move them between steps by dragging
// or with each party's buttons (earlier, later, sign with the step before). The order is kept in the hidden
// "routing" field as the list of steps the server checks.
(function () {
  "use strict";

  function init(form) {
    var input = form.querySelector("#routing");
    var list = form.querySelector("#steps");
    var status = form.querySelector("#order-status");
    var words = form.querySelector(".signing-order").dataset;
    var steps;
    try { steps = JSON.parse(input.value || "[]"); } catch (e) { steps = []; }
    var names = {};
    var colours = {};
    list.querySelectorAll(".party-chip").forEach(function (chip) {
      names[chip.dataset.key] = chip.querySelector(".chip-label").textContent;
      colours[chip.dataset.key] = chip.style.borderColor;
    });
    // A label typed before this ran (a slow page) counts as much as one typed after.
    form.querySelectorAll(".party-def").forEach(function (fieldset) {
      var en = fieldset.querySelector('[name="party-label-en"]');
      if (fieldset.dataset.key && en && en.value !== en.defaultValue && en.value.trim()) {
        names[fieldset.dataset.key] = en.value.trim();
      }
    });

    function where(key) {
      for (var i = 0; i < steps.length; i++) {
        var j = steps[i].indexOf(key);
        if (j >= 0) return [i, j];
      }
      return null;
    }

    function tidy() {
      steps = steps.filter(function (s) { return s.length; });
      input.value = JSON.stringify(steps);
    }

    function say(key) {
      var at = where(key);
      if (!at) return;
      status.textContent = words.saidAt.replace("%(party)s", names[key] || key).replace("%(n)s", at[0] + 1)
        .replace("%(also)s", steps[at[0]].length > 1 ? words.together : "");
    }

    function move(key, how) {
      var at = where(key);
      if (!at) return;
      var i = at[0];
      var alone = steps[i].length === 1;
      steps[i].splice(at[1], 1);
      if (how === "join") {
        steps[i - 1].push(key);
      } else if (how === "earlier") {
        if (alone) { steps.splice(i, 1); steps.splice(Math.max(i - 1, 0), 0, [key]); }
        else steps.splice(i, 0, [key]);
      } else if (how === "later") {
        if (alone) { steps.splice(i, 1); steps.splice(Math.min(i + 1, steps.length), 0, [key]); }
        else steps.splice(i + 1, 0, [key]);
      }
      tidy();
      draw(key, how);
      say(key);
    }

    function button(label, how, key, disabled) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = "small";
      b.textContent = label;
      b.dataset.move = how;
      b.setAttribute("aria-label", label + ": " + (names[key] || key));
      b.disabled = disabled;
      b.addEventListener("click", function () { move(key, how); });
      return b;
    }

    function draw(focusKey, focusHow) {
      list.textContent = "";
      steps.forEach(function (step, i) {
        var li = document.createElement("li");
        li.className = "step";
        li.dataset.step = i;
        var number = document.createElement("span");
        number.className = "step-number";
        number.textContent = words.step.replace("%(n)s", i + 1);
        li.appendChild(number);
        var ul = document.createElement("ul");
        ul.className = "step-parties";
        step.forEach(function (key) {
          var chip = document.createElement("li");
          chip.className = "party-chip";
          chip.dataset.key = key;
          chip.draggable = true;
          chip.style.borderColor = colours[key] || "#6e7781";
          var swatch = document.createElement("span");
          swatch.className = "party-swatch";
          swatch.style.background = colours[key] || "#6e7781";
          var label = document.createElement("span");
          label.className = "chip-label";
          label.textContent = names[key] || key;
          chip.append(swatch, " ", label, " ");
          var alone = step.length === 1;
          chip.appendChild(button(words.earlier, "earlier", key, i === 0 && alone));
          chip.appendChild(button(words.later, "later", key, i === steps.length - 1 && alone));
          chip.appendChild(button(words.join, "join", key, i === 0));
          chip.addEventListener("dragstart", function (e) { e.dataTransfer.setData("text/plain", key); });
          ul.appendChild(chip);
        });
        li.appendChild(ul);
        li.addEventListener("dragover", function (e) { e.preventDefault(); });
        li.addEventListener("drop", function (e) {
          e.preventDefault();
          var key = e.dataTransfer.getData("text/plain");
          var at = where(key);
          if (!at || at[0] === i) return;
          steps[at[0]].splice(at[1], 1);
          steps[i].push(key);
          tidy();
          draw();
          say(key);
        });
        list.appendChild(li);
      });
      var zone = document.createElement("li");
      zone.className = "step step-new";
      zone.textContent = words.newStep;
      zone.addEventListener("dragover", function (e) { e.preventDefault(); });
      zone.addEventListener("drop", function (e) {
        e.preventDefault();
        var key = e.dataTransfer.getData("text/plain");
        var at = where(key);
        if (!at) return;
        steps[at[0]].splice(at[1], 1);
        steps.push([key]);
        tidy();
        draw();
        say(key);
      });
      list.appendChild(zone);
      if (focusKey) {
        var target = list.querySelector('.party-chip[data-key="' + focusKey + '"] [data-move="' + focusHow + '"]');
        if (target && target.disabled) target = list.querySelector('.party-chip[data-key="' + focusKey + '"] button:not([disabled])');
        if (target) target.focus();
      }
    }

    function watch(fieldset) {
      var key = fieldset.querySelector('[name="party-key"]');
      var en = fieldset.querySelector('[name="party-label-en"]');
      var colour = fieldset.querySelector('[name="party-colour"]');
      var current = fieldset.dataset.key;
      function update() {
        var next = key.value.trim();
        if (current && current !== next) {
          var at = where(current);
          if (at) steps[at[0]][at[1]] = next;
          delete names[current];
        } else if (!current && next && !where(next)) {
          steps.push([next]);
        }
        if (next) {
          names[next] = en.value.trim() || (current && names[current]) || next;
          colours[next] = colour.value;
        }
        current = next;
        fieldset.dataset.key = next;
        tidy();
        draw();
      }
      key.addEventListener("change", update);
      en.addEventListener("change", update);
      colour.addEventListener("change", update);
      var remove = fieldset.querySelector("[data-remove-party]");
      if (remove) {
        remove.addEventListener("click", function () {
          var at = current && where(current);
          if (at) steps[at[0]].splice(at[1], 1);
          fieldset.remove();
          tidy();
          draw();
          var add = form.querySelector("#add-party");
          if (add) add.focus();
        });
      }
    }

    form.querySelectorAll(".party-def").forEach(watch);
    var add = form.querySelector("#add-party");
    if (add) {
      add.hidden = false;
      add.addEventListener("click", function () {
        var fresh = form.querySelector("#new-party").content.firstElementChild.cloneNode(true);
        form.querySelector("#party-list").appendChild(fresh);
        watch(fresh);
        fresh.querySelector('[name="party-key"]').focus();
      });
    }
    tidy();
    draw();
  }

  // On the page, and on a part HTMX swaps in (the new-batch page's columns for another template).
  function initIn(root) {
    root.querySelectorAll("[data-party-editor]").forEach(function (el) {
      if (el.dataset.ready) return;
      el.dataset.ready = "1";
      init(el);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { initIn(document); });
  document.addEventListener("htmx:load", function (e) { initIn(e.target.parentNode || document); });
})();
