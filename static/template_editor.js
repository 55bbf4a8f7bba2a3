// A rich-text view of an HTML template beside its source (pell, vendored). The textarea stays the truth:
// the rich view writes back only when someone edits in it, and {{ placeholders }} / {% tags %} round-trip
// exactly as written (they are swapped for markers while the browser holds the HTML).
(function () {
  var JINJA = /\{\{[\s\S]*?\}\}|\{%[\s\S]*?%\}|\{#[\s\S]*?#\}/g;
  var MARK = /\u27e6(\d+)\u27e7/g;  // ⟦n⟧: survives the HTML parser in text and in attribute values
  var BODY = /^([\s\S]*?<body[^>]*>)([\s\S]*?)(<\/body>[\s\S]*)$/i;

  function setup() {
    var source = document.getElementById("html-source");
    var pane = document.getElementById("rich-pane");
    var holder = document.getElementById("rich-editor");
    if (!source || !pane || !holder || !window.pell) return;
    var tabs = document.getElementById("editor-tabs");
    var tabSource = document.getElementById("tab-source");
    var tabRich = document.getElementById("tab-rich");
    var refused = document.getElementById("rich-refused");
    var tokens = [], head = "", tail = "", editor = null;

    // The palette's colour of each party's signature and fields, by the placeholder that marks them.
    var palette = document.getElementById("palette");
    var colours = palette ? JSON.parse(palette.getAttribute("data-colours") || "{}") : {};
    var pending = document.getElementById("palette-fields");

    function colourOf(token) {
      var name = (/^\{\{\s*([a-z0-9_]+)\s*\}\}$/i.exec(token) || [])[1];
      return name ? colours[name] : null;
    }
    function chip(i) {
      var span = document.createElement("span");
      span.className = "ph";
      span.contentEditable = "false";
      span.setAttribute("data-ph", String(i));
      span.textContent = tokens[i];
      var colour = colourOf(tokens[i]);
      if (colour) { span.style.borderColor = colour; span.style.boxShadow = "inset 4px 0 0 " + colour; }
      return span;
    }
    function insert(token) {
      tokens.push(token);
      editor.content.focus();
      restore();
      // Inserted editable, then made read-only: Chromium puts a read-only span typed at the end of a paragraph on
      // a line of its own, outside the paragraph.
      var made = chip(tokens.length - 1);
      made.removeAttribute("contenteditable");
      document.execCommand("insertHTML", false, made.outerHTML + "\u00a0");
      editor.content.querySelectorAll("span.ph:not([contenteditable])").forEach(function (s) { s.contentEditable = "false"; });
      source.value = serialise();
    }
    // The cursor's place in the text, kept while a palette button has the focus.
    var saved = null;
    function remember() {
      var sel = window.getSelection();
      if (sel.rangeCount && editor.content.contains(sel.anchorNode)) saved = sel.getRangeAt(0).cloneRange();
    }
    function restore() {
      if (!saved) return;
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(saved);
    }
    // Text markers become chips; markers inside attributes stay as text and are swapped back on the way out.
    function chips(root) {
      var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT), found = [], node;
      while ((node = walker.nextNode())) if (node.nodeValue.indexOf("\u27e6") >= 0) found.push(node);
      found.forEach(function (text) {
        var parts = text.nodeValue.split(/(\u27e6\d+\u27e7)/), frag = document.createDocumentFragment();
        parts.forEach(function (p) {
          var m = /^\u27e6(\d+)\u27e7$/.exec(p);
          frag.appendChild(m ? chip(+m[1]) : document.createTextNode(p));
        });
        text.parentNode.replaceChild(frag, text);
      });
    }
    function serialise() {
      var copy = editor.content.cloneNode(true);
      copy.querySelectorAll("span.ph[data-ph]").forEach(function (s) {
        s.replaceWith(document.createTextNode("\u27e6" + s.getAttribute("data-ph") + "\u27e7"));
      });
      return head + copy.innerHTML.replace(MARK, function (_, i) { return tokens[+i]; }) + tail;
    }
    function order(html) { return (html.match(JINJA) || []).join("\n"); }

    function load() {
      var html = source.value, parts = BODY.exec(html) || ["", "", html, ""];
      // Whitespace around the body stays outside the editor: pell re-wraps content whose first node is text.
      var inner = /^(\s*)([\s\S]*?)(\s*)$/.exec(parts[2]);
      head = parts[1] + inner[1]; tail = inner[3] + parts[3];
      tokens = [];
      var marked = inner[2].replace(JINJA, function (m) { tokens.push(m); return "\u27e6" + (tokens.length - 1) + "\u27e7"; });
      editor.content.innerHTML = marked;
      chips(editor.content);
      // The browser may move text out of a table; if the template's tags no longer come in the same order,
      // editing here would change what the template does: refuse, and say so.
      var kept = order(serialise()) === order(html);
      refused.hidden = kept;
      refused.textContent = kept ? "" : pane.getAttribute("data-refused");
      editor.content.contentEditable = kept ? "true" : "false";
      return kept;
    }
    function show(rich) {
      tabSource.setAttribute("aria-selected", String(!rich));
      tabRich.setAttribute("aria-selected", String(rich));
      document.getElementById("source-pane").hidden = rich;
      pane.hidden = !rich;
      if (rich) load();
    }
    // pell's own button titles are English: the page gives them in the staff's language.
    var titles = JSON.parse(pane.getAttribute("data-titles") || "{}");
    editor = window.pell.init({
      element: holder,
      defaultParagraphSeparator: "p",
      onChange: function () { source.value = serialise(); },
      actions: [
        { name: "bold" }, { name: "italic" }, { name: "underline" }, { name: "heading1", icon: "H1" },
        { name: "heading2", icon: "H2" }, { name: "paragraph" }, { name: "olist" }, { name: "ulist" }, { name: "line" },
        { name: "placeholder", icon: "{{ }}", title: pane.getAttribute("data-insert"), result: function () {
          var name = window.prompt(pane.getAttribute("data-ask"), "");
          if (!name || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name.trim())) return;
          insert("{{ " + name.trim() + " }}");
        } }
      ].map(function (a) { if (titles[a.name]) a.title = titles[a.name]; return a; })
    });
    editor.content.setAttribute("role", "textbox");
    editor.content.setAttribute("aria-multiline", "true");
    editor.content.setAttribute("aria-label", pane.getAttribute("data-label"));
    // The accessible name starts with the visible text (WCAG 2.5.3): "H1: Heading 1", "B: Bold".
    editor.querySelectorAll("button").forEach(function (b) {
      var text = b.textContent.trim(), title = b.getAttribute("title") || text;
      b.setAttribute("aria-label", /^[A-Za-z0-9]+$/.test(text) && title.indexOf(text) !== 0 ? text + ": " + title : title);
    });
    ["keyup", "mouseup", "input", "blur"].forEach(function (e) { editor.content.addEventListener(e, remember); });
    if (palette) {
      palette.hidden = false;
      palette.querySelectorAll("button[data-token]").forEach(function (b) {
        b.addEventListener("click", function () { insert(b.getAttribute("data-token")); });
      });
      // A field a party fills: its name asked, its type and party kept for the save (the field list after it); one
      // filled in when the party signs is named after them.
      palette.querySelectorAll("button[data-field-type]").forEach(function (b) {
        b.addEventListener("click", function () {
          var select = palette.querySelector("#palette-party");
          // The date signed and the signer's name are named after their party: one of each per party.
          var named = b.getAttribute("data-named");
          var name = named ? (named + "_" + select.value).slice(0, 40) : window.prompt(palette.getAttribute("data-ask-field"), "");
          name = (name || "").trim().toLowerCase().replace(/[^a-z0-9_]+/g, "_").replace(/^_+|_+$/g, "");
          if (!/^[a-z][a-z0-9_]*$/.test(name)) return;
          colours["field_" + name] = select.selectedOptions[0].getAttribute("data-colour");
          var given = JSON.parse(pending.value || "[]").filter(function (f) { return f.name !== name; });
          given.push({ name: name, type: b.getAttribute("data-field-type"), role: select.value });
          pending.value = JSON.stringify(given);
          insert("{{ field_" + name + " }}");
        });
      });
    }
    tabs.hidden = false;
    tabSource.addEventListener("click", function () { show(false); });
    tabRich.addEventListener("click", function () { show(true); });
  }
  document.addEventListener("DOMContentLoaded", setup);
})();
