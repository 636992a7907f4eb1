"""runner/ runs one way: the report reads records and verdicts without importing what runs or checks, the checks import
no reporting, the run's machinery neither; and the graph of imports between its modules, function bodies included,
has no cycle."""

import ast
from pathlib import Path

RUNNER = Path(__file__).resolve().parent.parent / "runner"
PACKAGE = "runner"
GROUND = {"catalog", "run_folder"}  # the registry and what a results folder holds: every part may read them
# What each part of runner/ may import from runner/, by the first part of the module's dotted name. The run command
# (pipeline) is the one module that composes the parts: the notebooks (run/), then the checks, then the report.
ALLOWED = {
    "catalog": set(),
    "run_folder": {"catalog"},
    "report": GROUND | {"report"},
    "checks": GROUND | {"checks", "run"},
    "run": GROUND | {"run"},
    "pipeline": GROUND | {"run", "checks", "report"},
    "bisect": GROUND | {"run", "report"},  # runs the run command it is given (cli passes pipeline's), reads its folders
    "cli": GROUND | {"pipeline", "bisect", "run", "checks", "report"},
}


def imported_modules(source, package=PACKAGE, name=""):
    """The modules of `package` a module's source imports anywhere (at top level or inside functions), as dotted names
    inside the package ('catalog', 'run.execution'); `name` is the module's own dotted name, for relative imports.

    Counts `import runner.x.y`, `from runner.x import y` (y as 'x.y': the caller keeps only real modules, else falls
    back to 'x'), `from runner import x` and the relative `from . import x`, `from .x import y`.
    """
    found = set()
    here = name.split(".")[:-1]  # the module's package inside runner/
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == package and len(parts) > 1:
                    found.add(".".join(parts[1:]))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0:
                if module.split(".")[0] != package:
                    continue
                base = module.split(".")[1:]
            else:
                if node.level - 1 > len(here):  # above the package: not one of its modules
                    continue
                base = here[:len(here) - (node.level - 1)] + [part for part in module.split(".") if part]
            for alias in node.names:
                found.add(".".join(base + [alias.name]) if alias.name != "*" else ".".join(base))
            if base:
                found.add(".".join(base))
    return found


def modules_of(folder=RUNNER):
    """{dotted name: path} of every module under `folder`, packages' __init__ files left out."""
    return {".".join(path.relative_to(folder).with_suffix("").parts): path
            for path in sorted(folder.rglob("*.py")) if path.stem != "__init__"}


def import_graph(folder=RUNNER, package=PACKAGE):
    """{module: modules of the package it imports} for every module under `folder`, by dotted name."""
    modules = modules_of(folder)
    return {name: sorted(imported_modules(path.read_text(), package, name) & set(modules) - {name})
            for name, path in modules.items()}


def part_of(module):
    """The part of runner/ a module belongs to, as ALLOWED names it: the module itself where ALLOWED names it, else its
    first name."""
    return module if module in ALLOWED else module.split(".")[0]


def wrong_way(graph):
    """The imports of `graph` that ALLOWED forbids, as 'module -> imported' lines."""
    return ["{} -> {}".format(module, target) for module, targets in sorted(graph.items()) for target in targets
            if part_of(target) != part_of(module) and target.split(".")[0] not in ALLOWED[part_of(module)]
            and part_of(target) not in ALLOWED[part_of(module)]]


def find_cycle(graph):
    """A cycle of `graph` ({node: [nodes it points to]}) as a list of nodes whose first and last are the same, or None."""
    state, stack = {}, []  # state: "open" while on the depth-first stack, "done" once every path from it is explored

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in graph.get(node, ()):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_every_module_of_runner_belongs_to_a_part():
    assert {part_of(module) for module in modules_of()} <= set(ALLOWED)


def test_runner_runs_one_way():
    graph = import_graph()
    assert "report.html_pages" in graph["report.run_report"]  # the graph sees the modules and their imports
    assert "checks.stage" in graph["pipeline"]  # ... including imports inside functions
    assert wrong_way(graph) == []


def test_the_run_does_not_import_the_checks_nor_the_report():
    graph = import_graph()
    run = [module for module in graph if module.startswith("run.")]
    assert "run.batch" in run and len(run) >= 10
    for module in run:
        assert {target.split(".")[0] for target in graph[module]} <= {"run", "catalog", "run_folder"}, module


def test_the_report_reads_records_and_verdicts_only():
    graph = import_graph()
    report = [module for module in graph if module.startswith("report.")]
    assert len(report) >= 5
    for module in report:
        assert {target.split(".")[0] for target in graph[module]} <= {"report", "catalog", "run_folder"}, module


def test_runner_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle in runner/: " + " -> ".join(cycle)


def test_the_html_report_renders_the_table_model_without_the_report_module():
    graph = import_graph()
    assert "report.table" in graph["report.html_pages"] and "report.run_report" not in graph["report.html_pages"]
    assert not {"report.run_report", "report.html_pages"} & set(graph["report.table"])


def test_a_report_module_that_imports_a_check_is_refused(tmp_path):
    (tmp_path / "report").mkdir()
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "equivalence.py").write_text("")
    (tmp_path / "run_folder.py").write_text("")
    (tmp_path / "report" / "table.py").write_text("from runner import run_folder\n"
                                                  "def cell():\n    from runner.checks import equivalence\n")
    assert wrong_way(import_graph(tmp_path)) == ["report.table -> checks.equivalence"]


def test_the_cycle_finder_names_a_cycle():
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b", "c"], "b": ["c"], "c": []}) is None  # a diamond is no cycle
    assert find_cycle({"a": ["b", "c"], "b": ["c"], "c": [], "d": ["a", "d"]}) == ["d", "d"]


def test_imports_inside_functions_and_every_spelling_count():
    source = ("import os\nimport runner.alpha\nfrom runner import beta, gamma\nfrom runner.delta import thing\n"
              "from common import tasks\nfrom . import epsilon\nfrom .zeta import other\n"
              "def f():\n    from runner import eta\n    import runner.theta.iota as t\n")
    found = imported_modules(source, name="report.table")
    assert {"alpha", "beta", "gamma", "delta", "delta.thing", "report.epsilon", "report.zeta", "eta",
            "theta.iota"} <= found
    assert "tasks" not in found and "common" not in found


def test_a_cycle_through_a_function_body_import_is_found(tmp_path):
    (tmp_path / "one.py").write_text("from runner import two\n")
    (tmp_path / "two.py").write_text("def later():\n    from runner import one\n")
    (tmp_path / "three.py").write_text("import runner.one\n")
    cycle = find_cycle(import_graph(tmp_path))
    assert cycle in (["one", "two", "one"], ["two", "one", "two"])


def test_the_command_line_s_namespace_goes_no_deeper_than_cli_py():
    """Past runner/cli.py every part takes plain settings (runner/run/settings.py) or keyword arguments: no function
    elsewhere in runner/ takes the parsed namespace, and none builds one."""
    found = []
    for path in sorted(RUNNER.rglob("*.py")):
        if path.name == "cli.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [a.arg for a in node.args.args + node.args.kwonlyargs]
                if "args" in names:
                    found.append("{}: {}(args)".format(path.relative_to(RUNNER.parent), node.name))
            if isinstance(node, ast.Attribute) and node.attr == "Namespace":
                found.append("{}: line {} builds a Namespace".format(path.relative_to(RUNNER.parent), node.lineno))
    assert not found, found
