// The Rosetta page's view: which notebooks are shown (any number, in the order picked), shared cells once, the
// columns sharing the width (stacked, each cell labelled, where they do not fit), the search over every framework's
// code, and the differences mode (each column against the first).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("rosetta-data").textContent);
  var frameworks = data.frameworks, byKey = {};
  frameworks.forEach(function (f) {
    byKey[f.key] = f;
    f.pattern = new RegExp("\\b(?:" + f.aliases.map(function (a) {
      return a.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    }).join("|") + ")\\b", "g");
  });
  var boxes = Array.prototype.slice.call(document.querySelectorAll("#frameworks input[name=fw]"));
  var diffBox = document.getElementById("diff"), namesBox = document.getElementById("names");
  var root = document.documentElement, header = document.getElementById("top");
  var legend = document.getElementById("legend"), permalink = document.getElementById("permalink");
  var searchBox = document.getElementById("search"), hits = document.getElementById("hits");
  var FOLD = 3;  // unchanged lines kept around a change before the rest of a run of them is folded away
  var MIN_COLUMN = 280;  // the narrowest column, in pixels: more columns than fit are stacked
  var MAX_HITS = 80;  // search results listed
  var picked = [];  // the shown frameworks' keys, in the order picked
  var wrapped = null;

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function chosen() {
    return picked.slice();
  }

  function names(keys) {
    var labels = keys.map(function (key) { return byKey[key].label; });
    return labels.length < 3 ? labels.join(" and ") : labels.slice(0, -1).join(", ") + " and " + labels[labels.length - 1];
  }

  function variantOf(row, key) {
    var found = null;
    row.querySelectorAll(".variant").forEach(function (variant) {
      if (variant.dataset.fws.split(" ").indexOf(key) >= 0) found = variant;
    });
    return found;
  }

  function sharedLabel(variant, keys) {
    var sharing = variant.dataset.fws.split(" ").length;
    if (sharing === frameworks.length && frameworks.length > 2) return "same in all " + sharing + " frameworks";
    return keys.length === 2 ? "same in both" : "same in all " + keys.length + " shown";
  }

  function lines(variant, key) {
    return Array.prototype.map.call(variant.querySelectorAll("pre.src .l"), function (line) {
      var text = line.textContent.replace(/\s+/g, " ").trim();
      return {html: line.innerHTML, text: text,
              key: namesBox.checked ? text.replace(byKey[key].pattern, "\u00a7") : text};
    });
  }

  // A cell of the view: a framework's variant, labelled (the label shows when the columns are stacked).
  function cellOf(variant, key, extra) {
    var cell = element("div", "cell" + (variant.classList.contains("none") ? " none" : "") + (extra || ""));
    cell.dataset.fws = key;
    cell.appendChild(element("div", "fwlabel", byKey[key].label));
    cell.insertAdjacentHTML("beforeend", variant.innerHTML);
    return cell;
  }

  // The longest common subsequence of two lists of lines: [["eq"|"del"|"add", index in a, index in b]].
  function diff(a, b) {
    var n = a.length, m = b.length, width = m + 1, table = new Int32Array((n + 1) * width), i, j, ops = [];
    for (i = n - 1; i >= 0; i--) {
      for (j = m - 1; j >= 0; j--) {
        table[i * width + j] = a[i].key === b[j].key ? table[(i + 1) * width + j + 1] + 1
          : Math.max(table[(i + 1) * width + j], table[i * width + j + 1]);
      }
    }
    i = 0; j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[i].key === b[j].key) { ops.push(["eq", i++, j++]); }
      else if (j >= m || (i < n && table[(i + 1) * width + j] >= table[i * width + j + 1])) { ops.push(["del", i++, -1]); }
      else { ops.push(["add", -1, j++]); }
    }
    return ops;
  }

  // Blank lines that the diff matched in the middle of a change are taken into the change, so that it reads as one.
  function anchorless(ops, a) {
    var out = [], start = 0;
    while (start < ops.length) {
      var end = start;
      while (end < ops.length && ops[end][0] === "eq" && a[ops[end][1]].text === "") end++;
      if (end > start && start > 0 && end < ops.length && ops[start - 1][0] !== "eq" && ops[end][0] !== "eq") {
        ops.slice(start, end).forEach(function (op) { out.push(["del", op[1], -1]); });
        ops.slice(start, end).forEach(function (op) { out.push(["add", -1, op[2]]); });
        start = end;
      } else {
        end = Math.max(end, start + 1);
        out.push.apply(out, ops.slice(start, end));
        start = end;
      }
    }
    return out;
  }

  // Rows of a split view: equal lines side by side, a run of removed lines beside the added ones that replace them.
  function splitRows(a, b, counts) {
    var rows = [], dels = [], adds = [];
    function flush() {
      for (var t = 0; t < Math.max(dels.length, adds.length); t++) {
        var left = t < dels.length ? dels[t] : -1, right = t < adds.length ? adds[t] : -1;
        var kind = left >= 0 && right >= 0 ? "chg" : left >= 0 ? "del" : "add";
        counts[kind] += 1;
        rows.push({kind: kind, left: left, right: right});
      }
      dels = []; adds = [];
    }
    anchorless(diff(a, b), a).forEach(function (op) {
      if (op[0] === "del") { dels.push(op[1]); return; }
      if (op[0] === "add") { adds.push(op[2]); return; }
      flush();
      rows.push({kind: a[op[1]].text === b[op[2]].text ? "eq" : "norm", left: op[1], right: op[2]});
    });
    flush();
    return rows;
  }

  function side(tr, list, index, kind) {
    var number = element("td", "n", index >= 0 ? String(index + 1) : ""), code = element("td", "code");
    if (index >= 0) code.innerHTML = list[index].html;
    code.classList.add(index < 0 ? "fill" : kind);
    tr.appendChild(number);
    tr.appendChild(code);
  }

  function splitTable(a, b, counts) {
    var table = element("table", "split highlight"), body = element("tbody"), rows = splitRows(a, b, counts);
    var hide = rows.map(function () { return false; }), start = 0, end, group = null;
    table.appendChild(body);
    while (start < rows.length) {  // fold the middle of each run of unchanged lines, keeping FOLD lines of context
      if (rows[start].kind !== "eq") { start++; continue; }
      for (end = start; end < rows.length && rows[end].kind === "eq"; end++) { /* the run */ }
      var from = start === 0 ? 0 : start + FOLD, to = end === rows.length ? end : end - FOLD;
      if (to - from > 2 && !(start === 0 && end === rows.length)) {
        for (var r = from; r < to; r++) hide[r] = true;
      }
      start = end;
    }
    rows.forEach(function (row, r) {
      var tr = element("tr");
      side(tr, a, row.left, row.kind === "add" ? "" : row.kind);
      side(tr, b, row.right, row.kind === "del" ? "" : row.kind);
      if (!hide[r]) { group = null; }
      else {
        if (!group) {
          group = {rows: [], marker: element("tr", "fold"), cell: element("td")};
          group.cell.colSpan = 4;
          group.marker.appendChild(group.cell);
          group.marker.addEventListener("click", function (folded) {
            return function () { folded.rows.forEach(function (line) { line.hidden = false; }); folded.marker.remove(); };
          }(group));
          body.appendChild(group.marker);
        }
        tr.hidden = true;
        group.rows.push(tr);
        group.cell.textContent = "\u22ef " + group.rows.length + " unchanged lines (show)";
      }
      body.appendChild(tr);
    });
    return table;
  }

  // Three or more columns, or stacked ones: each column's lines are compared with the first one's and marked.
  function markedColumns(variants, keys, counts) {
    var lists = variants.map(function (variant, i) { return lines(variant, keys[i]); });
    var marks = lists.map(function (list) { return list.map(function () { return ""; }); });
    for (var c = 1; c < lists.length; c++) {
      diff(lists[0], lists[c]).forEach(function (op) {
        if (op[0] === "del") { marks[0][op[1]] = "del"; }
        if (op[0] === "add") { marks[c][op[2]] = "add"; counts.add += 1; }
      });
    }
    counts.del += marks[0].filter(function (mark) { return mark; }).length;
    return variants.map(function (variant, i) {
      var cell = cellOf(variant, keys[i]);
      cell.querySelectorAll("pre.src .l").forEach(function (line, n) { if (marks[i][n]) line.classList.add(marks[i][n]); });
      return cell;
    });
  }

  function renderRow(row, keys, differences, counts) {
    var view = row.querySelector(".view");
    view.textContent = "";
    var variants = keys.map(function (key) { return variantOf(row, key); });
    var same = variants.every(function (variant) { return variant === variants[0]; });
    row.hidden = !variants.length || variants.every(function (variant) { return variant.classList.contains("none"); });
    if (row.hidden) return;
    if (row.dataset.kind === "code") counts.code += 1;
    if (same && keys.length > 1) {
      var lineCount = Number(variants[0].dataset.lines);
      var shared;
      if (differences) {
        shared = element("details", "cell span same");
        shared.appendChild(element("summary", "", "identical in " + names(keys) + " (" + row.dataset.kind +
          (lineCount ? ", " + lineCount + " lines" : "") + ")"));
      } else {
        shared = element("div", "cell span");
        shared.appendChild(element("span", "badge", sharedLabel(variants[0], keys)));
      }
      shared.dataset.fws = keys.join(" ");
      shared.insertAdjacentHTML("beforeend", variants[0].innerHTML);
      view.appendChild(shared);
      return;
    }
    var code = row.dataset.kind === "code" && variants.every(function (variant) { return !variant.classList.contains("none"); });
    if (differences && code && keys.length === 2 && !wrapped) {
      var cell = element("div", "cell span");
      cell.dataset.fws = keys.join(" ");
      cell.appendChild(splitTable(lines(variants[0], keys[0]), lines(variants[1], keys[1]), counts));
      variants.forEach(function (variant, i) {  // the helpers each side calls, below the table
        variant.querySelectorAll("details.helper").forEach(function (helper, n) {
          if (!n) cell.appendChild(element("div", "fwlabel-inline note", byKey[keys[i]].label + " calls:"));
          cell.appendChild(helper.cloneNode(true));
        });
      });
      view.appendChild(cell);
      return;
    }
    if (differences && code) {
      markedColumns(variants, keys, counts).forEach(function (cell) { view.appendChild(cell); });
      return;
    }
    variants.forEach(function (variant, i) { view.appendChild(cellOf(variant, keys[i])); });
  }

  function describe(keys, differences) {
    legend.textContent = "";
    if (!differences || keys.length < 2) {
      legend.textContent = frameworks.length + " notebooks; tick the ones to read side by side (the search box " +
        "searches them all). Cells the shown notebooks share are shown once, across the columns. Tick " +
        "\u201cdifferences\u201d to compare each column with the first, line by line.";
      return;
    }
    var left = byKey[keys[0]].label;
    legend.insertAdjacentHTML("beforeend", keys.length === 2 && !wrapped
      ? "Line by line: <i class=\"chg\">changed</i> <i class=\"del\">only in " + left + "</i> <i class=\"add\">only in " +
        byKey[keys[1]].label + "</i> <i class=\"fill\">&nbsp;</i> no line. "
      : "Each column against " + left + ": <i class=\"del\">" + left + " lines missing from another column</i> " +
        "<i class=\"add\">lines not in " + left + "</i>. ");
    legend.appendChild(document.createTextNode("Code only; spaces are collapsed before comparing. "));
    if (namesBox.checked) {
      legend.insertAdjacentHTML("beforeend", "<i class=\"norm\">&nbsp;</i> same once the names each notebook " +
        "imports from its framework count as one: ");
      keys.forEach(function (key, i) {
        var item = element("span", "", (i ? "; " : "") + byKey[key].label + " ");
        item.appendChild(element("code", "", byKey[key].aliases.join(", ")));
        legend.appendChild(item);
      });
      legend.appendChild(document.createTextNode("."));
    } else {
      legend.appendChild(document.createTextNode("Names are compared as written."));
    }
  }

  function summary(counts) {
    var parts = [];
    if (counts.chg) parts.push(counts.chg + " changed");
    if (counts.del) parts.push(counts.del + " removed");
    if (counts.add) parts.push(counts.add + " added");
    if (!counts.code) return "";
    return parts.length ? parts.join(", ") + " lines" : "code: no line differs";
  }

  function measure() {
    root.style.setProperty("--hh", header.offsetHeight + "px");
  }

  // How many columns fit side by side; more than that are stacked, each cell labelled with its framework.
  function fits() {
    var body = document.querySelector(".sec-body");
    var gap = 8, width = body ? body.clientWidth : window.innerWidth;
    return Math.max(1, Math.floor((width + gap) / (MIN_COLUMN + gap)));
  }

  function layout(keys) {
    var fit = fits();
    root.style.setProperty("--n", String(Math.max(1, Math.min(keys.length, fit))));
    wrapped = keys.length > fit;
    document.body.classList.toggle("wrapped", wrapped);
  }

  function render() {
    var keys = chosen(), differences = diffBox.checked;
    boxes.forEach(function (box) { box.checked = keys.indexOf(box.value) >= 0; });
    layout(keys);
    document.querySelectorAll(".colhead[data-fw]").forEach(function (head) {
      var index = keys.indexOf(head.dataset.fw);
      head.hidden = index < 0;
      head.style.order = String(index);
    });
    document.querySelectorAll(".sec").forEach(function (section) {
      var counts = {chg: 0, del: 0, add: 0, code: 0};
      section.querySelectorAll(".cellrow").forEach(function (row) { renderRow(row, keys, differences, counts); });
      section.querySelector(".sec-note").textContent = differences && keys.length > 1 ? summary(counts) : "";
    });
    document.getElementById("names-toggle").hidden = !differences;
    describe(keys, differences);
    var query = "?fw=" + keys.join(",") + (differences ? "&diff=1" : "") + (namesBox.checked ? "" : "&names=0");
    permalink.href = query + location.hash;
    try { history.replaceState(null, "", query + location.hash); } catch (error) { /* a file: page may refuse */ }
    measure();
  }

  function pick(key) {
    if (picked.indexOf(key) < 0) picked.push(key);
  }

  // A row the shown frameworks have nothing in is hidden: going to it shows the first framework that has a cell there.
  function show(target) {
    var row = target.closest ? target.closest(".cellrow") : null;
    if (row && row.hidden) {
      var variant = row.querySelector(".variant:not(.none)");
      if (variant) { pick(variant.dataset.fws.split(" ")[0]); render(); }
    }
    target.scrollIntoView();
  }

  function go() {
    var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target) show(target);
  }

  // The search: every line of every framework's code on the page (each cell and each helper's source), shown or not.
  var corpus = null;

  function lineIndex() {
    corpus = [];
    document.querySelectorAll(".cellrow").forEach(function (row) {
      var section = data.sections[row.closest(".sec").dataset.section] || "";
      var concept = row.querySelector("h3.concept a.self");
      row.querySelectorAll(".variant").forEach(function (variant) {
        if (variant.classList.contains("none")) return;
        var fws = variant.dataset.fws.split(" ");
        variant.querySelectorAll("pre").forEach(function (pre, p) {
          var details = pre.classList.contains("helper-src") ? pre.closest("details") : null;
          var where = details ? details.querySelector("summary").firstChild.textContent : "";
          pre.querySelectorAll(".l").forEach(function (line, n) {
            var text = line.textContent;
            corpus.push({row: row, fws: fws, section: section, concept: concept ? concept.textContent : "",
                         where: where, pre: p, line: n, text: text, lower: text.toLowerCase()});
          });
        });
      });
    });
  }

  function labelsOf(fws) {
    var labels = fws.map(function (key) { return byKey[key].label; });
    return labels.length > 3 ? labels.slice(0, 2).join(", ") + " and " + (labels.length - 2) + " more" : labels.join(", ");
  }

  function marked(text, query) {
    var code = element("code"), at = text.toLowerCase().indexOf(query);
    code.appendChild(document.createTextNode(text.slice(0, at).replace(/^\s+/, "")));
    code.appendChild(element("mark", "", text.slice(at, at + query.length)));
    code.appendChild(document.createTextNode(text.slice(at + query.length)));
    return code;
  }

  function search() {
    var query = searchBox.value.trim().toLowerCase();
    hits.textContent = "";
    if (query.length < 2) { hits.hidden = true; return; }
    if (!corpus) lineIndex();
    var found = corpus.filter(function (entry) { return entry.lower.indexOf(query) >= 0; });
    var keys = chosen();
    hits.appendChild(element("p", "", found.length ? found.length + " lines" + (found.length > MAX_HITS ?
      ", the first " + MAX_HITS + " listed" : "") : "no line of any framework's code has \u201c" + searchBox.value.trim() + "\u201d"));
    found.slice(0, MAX_HITS).forEach(function (entry) {
      var button = element("button", "hit");
      button.type = "button";
      button.dataset.fws = entry.fws.join(" ");
      button.appendChild(element("b", "", labelsOf(entry.fws)));
      var shown = entry.fws.some(function (key) { return keys.indexOf(key) >= 0; });
      button.appendChild(element("span", "where", " \u00b7 " + entry.section + (entry.concept ? " \u00b7 " + entry.concept : "") +
        (entry.where ? " \u00b7 " + entry.where : "") + (shown ? "" : " (not shown)")));
      button.appendChild(marked(entry.text, query));
      button.addEventListener("click", function () { reveal(entry); });
      hits.appendChild(button);
    });
    hits.hidden = false;
  }

  // Show the line a search found: its framework's column (added if not shown), the cell, the line marked.
  function reveal(entry) {
    var keys = chosen();
    var shown = entry.fws.filter(function (key) { return keys.indexOf(key) >= 0; });
    var key = shown.length ? shown[0] : entry.fws[0];
    if (!shown.length) { pick(key); render(); }
    hits.hidden = true;
    document.querySelectorAll(".found").forEach(function (node) { node.classList.remove("found"); });
    var cell = Array.prototype.filter.call(entry.row.querySelectorAll(".view > .cell"), function (candidate) {
      return (candidate.dataset.fws || "").split(" ").indexOf(key) >= 0;
    })[0];
    var target = cell || entry.row, pre = cell ? cell.querySelectorAll("pre")[entry.pre] : null;
    var line = pre ? pre.querySelectorAll(".l")[entry.line] : null;
    if (line) {
      var details = line.closest("details");
      if (details) details.open = true;
      line.classList.add("found");
      target = line;
    }
    if (cell) cell.classList.add("found");
    target.scrollIntoView({block: "center"});
  }

  var query = new URLSearchParams(location.search);
  var asked = (query.get("fw") || [query.get("left"), query.get("right"), query.get("third")].join(","))
    .split(",").filter(function (key) { return byKey[key]; });
  (asked.length ? asked : data.defaults).forEach(pick);
  diffBox.checked = query.get("diff") === "1";
  namesBox.checked = query.get("names") !== "0";
  boxes.forEach(function (box) {
    box.addEventListener("change", function () {
      if (box.checked) { pick(box.value); } else { picked = picked.filter(function (key) { return key !== box.value; }); }
      render();
    });
  });
  [diffBox, namesBox].forEach(function (control) { control.addEventListener("change", render); });
  searchBox.addEventListener("input", search);
  searchBox.addEventListener("focus", function () { if (searchBox.value.trim().length > 1) search(); });
  searchBox.addEventListener("keydown", function (event) { if (event.key === "Escape") hits.hidden = true; });
  document.addEventListener("click", function (event) {
    if (!hits.hidden && !event.target.closest(".search")) hits.hidden = true;
  });
  window.addEventListener("resize", function () {
    var was = wrapped;
    layout(chosen());
    if (was !== wrapped) { render(); } else { measure(); }
  });
  window.addEventListener("hashchange", go);
  render();
  go();
}());
