// The concept index's view: which frameworks are shown (any number, in the order picked) and which tasks' cells; a
// concept that no picked task has shows its own first task. Columns share the width, stacked where they do not fit.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("index-data").textContent);
  var known = {}, root = document.documentElement, header = document.getElementById("top");
  data.frameworks.forEach(function (f) { known[f.key] = f; });
  var fwBoxes = Array.prototype.slice.call(document.querySelectorAll("#frameworks input[name=fw]"));
  var taskBoxes = Array.prototype.slice.call(document.querySelectorAll("#tasks input[name=task]"));
  var permalink = document.getElementById("permalink");
  var MIN_COLUMN = 280;  // the narrowest column, in pixels: more columns than fit are stacked
  var picked = [], wrapped = null;

  function pickedTasks() {
    return taskBoxes.filter(function (box) { return box.checked; }).map(function (box) { return box.value; });
  }

  function layout() {
    var grid = document.querySelector(".cgrid"), gap = 8;
    var width = grid ? grid.clientWidth : window.innerWidth;
    var fit = Math.max(1, Math.floor((width + gap) / (MIN_COLUMN + gap)));
    root.style.setProperty("--n", String(Math.max(1, Math.min(picked.length, fit))));
    wrapped = picked.length > fit;
    document.body.classList.toggle("wrapped", wrapped);
    root.style.setProperty("--hh", header.offsetHeight + "px");
  }

  function render() {
    var tasks = pickedTasks();
    fwBoxes.forEach(function (box) { box.checked = picked.indexOf(box.value) >= 0; });
    document.querySelectorAll(".colhead[data-fw], .fwcell").forEach(function (node) {
      var index = picked.indexOf(node.dataset.fw);
      node.hidden = index < 0;
      node.style.order = String(index);
    });
    document.querySelectorAll(".crow").forEach(function (row) {
      var having = row.dataset.tasks.split(" ");
      var shown = having.filter(function (task) { return tasks.indexOf(task) >= 0; });
      var fallback = !shown.length;
      if (fallback) shown = having.slice(0, 1);
      row.querySelector(".fallback").textContent = fallback
        ? (tasks.length ? "No picked task has it: shown from " : "No task picked: shown from ") + data.tasks[shown[0]] + "." : "";
      row.querySelectorAll(".entry").forEach(function (entry) {
        var any = false;
        entry.querySelectorAll(".entry-task").forEach(function (head) {
          head.hidden = shown.indexOf(head.dataset.task) < 0;
          any = any || !head.hidden;
        });
        entry.hidden = !any;
      });
    });
    layout();
    var query = "?fw=" + picked.join(",") + "&task=" + tasks.join(",");
    permalink.href = query + location.hash;
    try { history.replaceState(null, "", query + location.hash); } catch (error) { /* a file: page may refuse */ }
  }

  var query = new URLSearchParams(location.search);
  var asked = (query.get("fw") || "").split(",").filter(function (key) { return known[key]; });
  (asked.length ? asked : data.defaults).forEach(function (key) { if (picked.indexOf(key) < 0) picked.push(key); });
  var askedTasks = (query.get("task") || "").split(",").filter(function (task) { return data.tasks[task]; });
  if (!askedTasks.length && !query.has("task")) askedTasks = data.defaultTasks;
  taskBoxes.forEach(function (box) { box.checked = askedTasks.indexOf(box.value) >= 0; });
  fwBoxes.forEach(function (box) {
    box.addEventListener("change", function () {
      if (box.checked) { if (picked.indexOf(box.value) < 0) picked.push(box.value); }
      else { picked = picked.filter(function (key) { return key !== box.value; }); }
      render();
    });
  });
  taskBoxes.forEach(function (box) { box.addEventListener("change", render); });
  document.getElementById("all-frameworks").addEventListener("click", function () {
    data.frameworks.forEach(function (f) { if (picked.indexOf(f.key) < 0) picked.push(f.key); });
    render();
  });
  window.addEventListener("resize", layout);
  render();
  if (location.hash) {
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target) target.scrollIntoView();
  }
}());
