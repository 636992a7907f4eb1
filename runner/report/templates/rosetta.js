// The Rosetta page's view: which notebooks are shown, shared cells once, and the differences mode.
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
  var picks = [0, 1, 2].map(function (i) { return document.getElementById("pick-" + i); });
  var diffBox = document.getElementById("diff"), namesBox = document.getElementById("names");
  var root = document.documentElement, header = document.getElementById("top");
  var legend = document.getElementById("legend"), permalink = document.getElementById("permalink");
  var FOLD = 3;  // unchanged lines kept around a change before the rest of a run of them is folded away

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function chosen() {
    var keys = [];
    picks.forEach(function (pick) {
      if (pick.value && byKey[pick.value] && keys.indexOf(pick.value) < 0) keys.push(pick.value);
    });
    return keys;
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
    return Array.prototype.map.call(variant.querySelectorAll(".l"), function (line) {
      var text = line.textContent.replace(/\s+/g, " ").trim();
      return {html: line.innerHTML, text: text,
              key: namesBox.checked ? text.replace(byKey[key].pattern, "\u00a7") : text};
    });
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

  // Three or more columns: each column's lines are compared with the left one's and marked.
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
      var cell = element("div", "cell");
      cell.innerHTML = variant.innerHTML;
      cell.querySelectorAll(".l").forEach(function (line, n) { if (marks[i][n]) line.classList.add(marks[i][n]); });
      return cell;
    });
  }

  function renderRow(row, keys, differences, counts) {
    var view = row.querySelector(".view");
    view.textContent = "";
    var variants = keys.map(function (key) { return variantOf(row, key); });
    var same = variants.every(function (variant) { return variant === variants[0]; });
    row.hidden = !variants.length || (same && variants[0].classList.contains("none"));
    if (row.hidden) return;
    if (row.dataset.kind === "code") counts.code += 1;
    if (same && keys.length > 1) {
      var lineCount = Number(variants[0].dataset.lines);
      if (differences) {
        var details = element("details", "cell span same");
        details.appendChild(element("summary", "", "identical in " + names(keys) + " (" + row.dataset.kind +
          (lineCount ? ", " + lineCount + " lines" : "") + ")"));
        details.insertAdjacentHTML("beforeend", variants[0].innerHTML);
        view.appendChild(details);
      } else {
        var shared = element("div", "cell span");
        shared.appendChild(element("span", "badge", sharedLabel(variants[0], keys)));
        shared.insertAdjacentHTML("beforeend", variants[0].innerHTML);
        view.appendChild(shared);
      }
      return;
    }
    var code = row.dataset.kind === "code" && variants.every(function (variant) { return !variant.classList.contains("none"); });
    if (differences && code && keys.length === 2) {
      var cell = element("div", "cell span");
      cell.appendChild(splitTable(lines(variants[0], keys[0]), lines(variants[1], keys[1]), counts));
      view.appendChild(cell);
      return;
    }
    if (differences && code) {
      markedColumns(variants, keys, counts).forEach(function (cell) { view.appendChild(cell); });
      return;
    }
    variants.forEach(function (variant) {
      var cell = element("div", "cell" + (variant.classList.contains("none") ? " none" : ""));
      cell.innerHTML = variant.innerHTML;
      view.appendChild(cell);
    });
  }

  function describe(keys, differences) {
    legend.textContent = "";
    if (!differences || keys.length < 2) {
      legend.textContent = frameworks.length + " notebooks; choose the ones to read side by side. Cells the shown " +
        "notebooks share are shown once, across the columns. Tick \u201cdifferences\u201d to compare them line by line.";
      return;
    }
    var left = byKey[keys[0]].label;
    legend.insertAdjacentHTML("beforeend", keys.length === 2
      ? "Line by line: <i class=\"chg\">changed</i> <i class=\"del\">only in " + left + "</i> <i class=\"add\">only in " +
        byKey[keys[1]].label + "</i> <i class=\"fill\">&nbsp;</i> no line. "
      : "Each column against " + left + ": <i class=\"del\">" + left + " lines missing from another column</i> " +
        "<i class=\"add\">lines not in " + left + "</i>. ");
    legend.appendChild(document.createTextNode("Spaces are collapsed before comparing. "));
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

  function render() {
    var keys = chosen(), differences = diffBox.checked;
    root.style.setProperty("--n", String(Math.max(keys.length, 1)));
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
    var query = "?left=" + (picks[0].value || "") + "&right=" + (picks[1].value || "") +
      (picks[2].value ? "&third=" + picks[2].value : "") + (differences ? "&diff=1" : "") + (namesBox.checked ? "" : "&names=0");
    permalink.href = query + location.hash;
    try { history.replaceState(null, "", query + location.hash); } catch (error) { /* a file: page may refuse */ }
    measure();
  }

  var query = new URLSearchParams(location.search);
  if (frameworks.length) {
    picks[0].value = byKey[query.get("left")] ? query.get("left") : frameworks[0].key;
    picks[1].value = byKey[query.get("right")] ? query.get("right") : frameworks[Math.min(1, frameworks.length - 1)].key;
    picks[2].value = byKey[query.get("third")] ? query.get("third") : "";
  }
  diffBox.checked = query.get("diff") === "1";
  namesBox.checked = query.get("names") !== "0";
  picks.concat([diffBox, namesBox]).forEach(function (control) { control.addEventListener("change", render); });
  window.addEventListener("resize", measure);
  render();
  if (location.hash) {
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target) target.scrollIntoView();
  }
}());
