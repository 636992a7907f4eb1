"""The notebooks' prose measured: words per notebook, words per markdown cell, words per sentence, and the share of
words in sentences that name the project's own machinery (the harness) rather than the framework. The targets
(TARGETS) are held by tests/test_prose.py; `python3 -m runner.report.prose [NOTEBOOK ...]` prints the figures (every
notebook in notebooks/ by default)."""

import ast
import json
import re
import statistics
import sys
from pathlib import Path

from runner import catalog

# median words per notebook, words in one markdown cell, words in one sentence, share of words naming the harness
TARGETS = {"median_words": 350, "cell_words": 100, "sentence_words": 40, "harness_share": 0.10}
# What names the harness: the project's packages and files, its record, checks, profiles and parameters
HARNESS = re.compile(
    r"\bcommon\b|frameworks/|\brun_all\b|\brunner\b|papermill|(?<![.\w])records?\b|\bledger\b|same[- ]weights|\bequivalence\b|"
    r"\bprofiles?\b|\bharness\b|\bsmoke\b|result_path|init_weights|export_weights|"
    r"`(?:datasets|environment|evaluation|hyperparams|results|timing|weights|memory|variants)\.", re.IGNORECASE)
CODE_SPAN = re.compile(r"`[^`\n]*`")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
# a sentence ends at . ! ? or : followed by a space and a capital, a backtick or a bracket, and at each block's end
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\[*\"])")
BLOCK = re.compile(r"\n\s*\n")


def helper_names():
    """The functions and classes of frameworks/*.py: named in prose in backticks, they are the harness's names."""
    names = set()
    for path in sorted((catalog.REPO / "frameworks").glob("*.py")):
        tree = ast.parse(path.read_text())
        names.update(node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef)))
    return names


def plain(markdown):
    """The text of a markdown cell as read: links as their text, fenced code and markup characters dropped."""
    text = LINK.sub(r"\1", FENCE.sub("", markdown))
    text = re.sub(r"^\s*#+\s*(.*)$", "\\1\n", text, flags=re.MULTILINE)  # a heading is a block of its own
    text = re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "\n", text, flags=re.MULTILINE)  # a list item is a block of its own
    return re.sub(r"\*\*|__", "", text)


def words(text):
    """The words of a text: whitespace-separated tokens with a letter or a digit."""
    return [token for token in text.split() if re.search(r"[A-Za-z0-9]", token)]


def sentences(markdown):
    """The sentences of a markdown cell (a heading or a list item ends one); code spans stay inside theirs."""
    text = plain(markdown)
    spans = []

    def hide(match):
        spans.append(match.group(0))
        return "\0{}\0".format(len(spans) - 1)

    hidden = CODE_SPAN.sub(hide, text)
    found = []
    for block in BLOCK.split(hidden):
        for sentence in SENTENCE_END.split(block.strip()):
            sentence = re.sub(r"\0(\d+)\0", lambda match: spans[int(match.group(1))], sentence).strip()
            if words(sentence):
                found.append(sentence)
    return found


def names_harness(sentence, helpers):
    """Whether a sentence names the harness: a term of HARNESS, or a frameworks/*.py helper as code."""
    if HARNESS.search(sentence):
        return True
    return any(span.strip("`").split("(")[0] in helpers for span in CODE_SPAN.findall(sentence))


def measure(path, helpers=None):
    """{words, harness_words, cells: [words of each markdown cell], sentences: [(words, sentence)]} of a notebook."""
    helpers = helper_names() if helpers is None else helpers
    cells = [c for c in json.loads(Path(path).read_text())["cells"] if c["cell_type"] == "markdown"]
    figures = {"words": 0, "harness_words": 0, "cells": [], "sentences": []}
    for cell in cells:
        source = "".join(cell["source"])
        figures["cells"].append(len(words(plain(source))))
        for sentence in sentences(source):
            count = len(words(sentence))
            figures["words"] += count
            figures["harness_words"] += count if names_harness(sentence, helpers) else 0
            figures["sentences"].append((count, sentence))
    return figures


def summary(paths):
    """The figures of every notebook in `paths` and their totals, against TARGETS."""
    helpers = helper_names()
    each = {Path(path).name: measure(path, helpers) for path in paths}
    total = sum(f["words"] for f in each.values())
    return {
        "notebooks": each,
        "median_words": statistics.median(f["words"] for f in each.values()) if each else 0,
        "harness_share": sum(f["harness_words"] for f in each.values()) / total if total else 0.0,
        "cells_over": [(name, n) for name, f in each.items() for n in f["cells"] if n > TARGETS["cell_words"]],
        "sentences_over": [(name, n, s) for name, f in each.items() for n, s in f["sentences"]
                           if n > TARGETS["sentence_words"]],
    }


def main(argv):
    paths = [Path(arg) for arg in argv] or sorted(catalog.NOTEBOOKS.glob("*.ipynb"))
    found = summary(paths)
    for name, f in found["notebooks"].items():
        print("{:32} {:5d} words, {:4.0%} naming the harness, largest cell {:3d}, longest sentence {:3d}".format(
            name, f["words"], f["harness_words"] / f["words"] if f["words"] else 0, max(f["cells"] or [0]),
            max([n for n, _ in f["sentences"]] or [0])))
    print("median words per notebook {:.0f} (target <= {}); harness share {:.1%} (<= {:.0%}); markdown cells over {} "
          "words: {}; sentences over {} words: {}".format(
              found["median_words"], TARGETS["median_words"], found["harness_share"], TARGETS["harness_share"],
              TARGETS["cell_words"], len(found["cells_over"]), TARGETS["sentence_words"], len(found["sentences_over"])))
    for name, count, sentence in found["sentences_over"][:20]:
        print("  {} ({} words): {}".format(name, count, sentence[:120]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
