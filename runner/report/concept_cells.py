"""The notebooks read by concept: each cell's section and concepts (its tags), the code of one concept in one notebook,
and the source of the helpers from frameworks/<module>.py that the code calls, which the Rosetta pages show beside the
call so that the framework's own API stays in view (common/concepts: which APIs each concept must show)."""

import ast
import functools
import io
import json
import re
import tokenize
from collections import namedtuple
from pathlib import Path

from common import concepts
from runner import catalog

FRAMEWORKS_DIR = catalog.REPO / "frameworks"
Cell = namedtuple("Cell", "section concepts kind source")
MAGIC = re.compile(r"^\s*%.*$", re.MULTILINE)  # IPython magics (%%writefile ...): not Python, left out of parsing


def cells_of(path):
    """The notebook's cells as Cell(section, concepts, kind, source): the section is the first tag (untagged cells
    before the first tagged one are "title", a later untagged cell is in the section before it), the concepts are
    the `concept:<name>` tags, kind is "markdown" or "code"."""
    cells, section = [], "title"
    for cell in json.loads(Path(path).read_text())["cells"]:
        tags = cell["metadata"].get("tags") or []
        sections = [tag for tag in tags if not tag.startswith(concepts.TAG_PREFIX)]
        section = sections[0] if sections else section
        kind = "markdown" if cell["cell_type"] == "markdown" else "code"
        cells.append(Cell(section, tuple(concepts.concept_tags(tags)), kind, "".join(cell["source"])))
    return cells


def concept_code(path, concept):
    """The code cells of `path` tagged with `concept`, in order."""
    return [cell.source for cell in cells_of(path) if cell.kind == "code" and concept in cell.concepts]


def parsed(source):
    """The syntax tree of a cell's code without its magics, or None where it is not Python."""
    try:
        return ast.parse(MAGIC.sub("", source))
    except SyntaxError:
        return None


def _stamp(path):
    """(path, modification time, size): a file's key in the caches below, new with each version of it."""
    stat = Path(path).stat()
    return str(path), stat.st_mtime_ns, stat.st_size


def helper_imports(path):
    """{name: (frameworks module, name there)} of every name the notebook imports from frameworks.<module>."""
    return _imports_in(*_stamp(path))


@functools.lru_cache(maxsize=256)
def _imports_in(path, mtime_ns, size):
    names = {}
    for cell in cells_of(path):
        tree = parsed(cell.source) if cell.kind == "code" else None
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("frameworks."):
                for alias in node.names:
                    names[alias.asname or alias.name] = (node.module.split(".", 1)[1], alias.name)
    return names


def _names_used(tree):
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _module_definitions(module):
    """({name: (source, tree)} of the top-level functions and classes of frameworks/<module>.py, {name: (module,
    name there)} of the names it imports from another frameworks module), read once per version of the file."""
    return _definitions_in(*_stamp(FRAMEWORKS_DIR / (module + ".py")))


@functools.lru_cache(maxsize=64)
def _definitions_in(path, mtime_ns, size):
    source = Path(path).read_text()
    definitions, imported = {}, {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            definitions[node.name] = (ast.get_source_segment(source, node), node)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("frameworks."):
            for alias in node.names:
                imported.setdefault(alias.asname or alias.name, (node.module.split(".", 1)[1], alias.name))
    return definitions, imported


def helper_sources(path, sources, depth=2):
    """[(module, name, source)] of the functions and classes of frameworks/*.py that the code `sources` (cells of the
    notebook at `path`) calls, and (with depth 2) those they call in turn, in the order first reached."""
    imported = helper_imports(path)
    pending = []
    for source in sources:
        tree = parsed(source)
        pending += sorted(name for name in _names_used(tree) if name in imported) if tree else []
    pending = [imported[name] + (1,) for name in pending]
    shown, seen = [], set()
    while pending:
        module, name, level = pending.pop(0)
        if (module, name) in seen:
            continue
        seen.add((module, name))
        definitions, reexported = _module_definitions(module)
        if name in definitions:
            text, node = definitions[name]
            shown.append((module, name, text))
            for used in sorted(_names_used(node)) if level < depth else ():
                if used != name and (used in definitions or used in reexported):
                    pending.append(((module, used) if used in definitions else reexported[used]) + (level + 1,))
        elif name in reexported:  # imported there from another frameworks module
            pending.append(reexported[name] + (level,))
    return shown


def without_comments(source):
    """Python source with its comments blanked out (a name in a comment is not code a reader sees run)."""
    lines = MAGIC.sub("", source).split("\n")
    try:
        for token in tokenize.generate_tokens(io.StringIO("\n".join(lines)).readline):
            if token.type == tokenize.COMMENT:
                row, column = token.start
                lines[row - 1] = lines[row - 1][:column]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return "\n".join(lines)


def api_in_view(api, sources, helpers):
    """Whether the call `api` appears as code (not in a comment) in the concept's cells or in the source of a helper
    they call."""
    texts = list(sources) + [text for _, _, text in helpers]
    return any(api in without_comments(text) for text in texts)
