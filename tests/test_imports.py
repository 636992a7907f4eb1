"""runner/ has no import cycle: the graph of imports between its modules, function bodies included, is acyclic."""

import ast
from pathlib import Path

RUNNER = Path(__file__).resolve().parent.parent / "runner"
PACKAGE = "runner"


def imported_modules(source, package=PACKAGE):
    """The modules of `package` a module's source imports anywhere (at top level or inside functions), by short name.

    Counts `import runner.x`, `from runner import x`, `from runner.x import y` and the relative `from . import x`,
    `from .x import y`; `from runner import x` names a module only if x is one (the caller filters by its modules).
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == package and len(parts) > 1:
                    found.add(parts[1])
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and module.split(".")[0] != package:
                continue
            if node.level > 1:  # above the package: not one of its modules
                continue
            inside = module.split(".")[1:] if node.level == 0 else [part for part in module.split(".") if part]
            if inside:
                found.add(inside[0])
            else:  # from runner import x, y / from . import x, y
                found.update(alias.name for alias in node.names)
    return found


def import_graph(folder=RUNNER, package=PACKAGE):
    """{module: modules of the package it imports} for every .py file directly in `folder`."""
    modules = {path.stem: path for path in sorted(folder.glob("*.py")) if path.stem != "__init__"}
    return {name: sorted(imported_modules(path.read_text(), package) & set(modules) - {name})
            for name, path in modules.items()}


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


def test_runner_has_no_import_cycle():
    graph = import_graph()
    assert "report" in graph and "html_report" in graph["report"]  # the graph sees the modules and their imports
    assert "equivalence" in graph["cli"]  # ... including imports inside functions
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in runner/: " + " -> ".join(cycle)


def test_the_html_report_renders_the_table_model_without_the_report_module():
    graph = import_graph()
    assert "table" in graph["html_report"] and "report" not in graph["html_report"]
    assert not {"report", "html_report"} & set(graph["table"])


def test_the_cycle_finder_names_a_cycle():
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b", "c"], "b": ["c"], "c": [], "d": ["a", "d"]}) == ["d", "d"]
    assert find_cycle({"a": ["b", "c"], "b": ["c"], "c": []}) is None  # a diamond is no cycle


def test_imports_inside_functions_and_every_spelling_count():
    source = ("import os\nimport runner.alpha\nfrom runner import beta, gamma\nfrom runner.delta import thing\n"
              "from common import tasks\nfrom . import epsilon\nfrom .zeta import other\n"
              "def f():\n    from runner import eta\n    import runner.theta as t\n")
    assert imported_modules(source) == {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}


def test_a_cycle_through_a_function_body_import_is_found(tmp_path):
    (tmp_path / "one.py").write_text("from runner import two\n")
    (tmp_path / "two.py").write_text("def later():\n    from runner import one\n")
    (tmp_path / "three.py").write_text("import runner.one\n")
    cycle = find_cycle(import_graph(tmp_path))
    assert cycle in (["one", "two", "one"], ["two", "one", "two"])
