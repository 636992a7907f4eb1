"""The docs stay true: the README is a front page of at most 200 lines whose tables name every registered framework
and task, with the tasks each framework has; every relative link of README.md and docs/*.md resolves, anchors
included; docs/commands.md has a section per command of `run_all.py -h` (and no other), mentions every option of
each, and names every environment of the catalog."""

import re
import subprocess
import sys

import pytest

from common import tasks
from runner import catalog

REPO = catalog.REPO
README = REPO / "README.md"
COMMANDS = REPO / "docs" / "commands.md"
PAGES = [README] + sorted((REPO / "docs").glob("**/*.md"))
README_MAX_LINES = 200
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # [text](target "title")


FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", flags=re.M | re.S)


def without_fences(markdown):
    """Markdown without its fenced code blocks (a `# comment` in a bash block is no heading)."""
    return FENCE.sub("", markdown)


def strip_code(markdown):
    """Markdown without fenced code blocks and inline code spans: what is in them is not a link."""
    return re.sub(r"(`+)[^`\n]*?\1", "", without_fences(markdown))


def tables(markdown):
    """Every Markdown table of a page, as lists of rows, each a list of stripped cell texts (the header row first,
    the separator row left out)."""
    found, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(re.fullmatch(r":?-+:?", cell) for cell in cells):
                current.append(cells)
        elif current:
            found.append(current)
            current = []
    return found


def plain(cell):
    """A cell's text without backticks."""
    return cell.replace("`", "").strip()


def table_headed(markdown, first, columns=()):
    """The one table whose header starts with `first` and has every name of `columns` among its cells."""
    matches = [t for t in tables(markdown) if plain(t[0][0]).lower() == first
               and set(columns) <= {plain(cell) for cell in t[0]}]
    assert len(matches) == 1, "expected one table headed '{}' with columns {}, found {}".format(
        first, ", ".join(columns), len(matches))
    return matches[0]


def frameworks_table(markdown):
    """{framework label: {column name: cell}} of the README's frameworks table (header 'framework', a column per task)."""
    header, *rows = table_headed(markdown, "framework", tasks.TASKS)
    names = [plain(cell) for cell in header]
    return {row[0]: dict(zip(names, row)) for row in rows}


def slug(heading):
    """GitHub's anchor for a heading: lowercase, punctuation dropped except hyphens and underscores, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path):
    """The anchors a file has: its headings' slugs (repeats numbered -1, -2, ... as GitHub does) for Markdown, the ids
    and names of its elements for HTML."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        found, seen = set(), {}
        for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", without_fences(text), flags=re.M):
            base = slug(heading)
            found.add(base if base not in seen else "{}-{}".format(base, seen[base]))
            seen[base] = seen.get(base, 0) + 1
        return found
    return set(re.findall(r"\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", text))


def broken_links(page):
    """'target: why' for every relative link of a Markdown page that does not resolve: the file is missing, or the
    #anchor names no heading of that Markdown file (no id of that HTML file)."""
    broken = []
    for target in LINK.findall(strip_code(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.is_file():
            broken.append("{}: no such file".format(target))
        elif anchor and file.suffix in (".md", ".html") and anchor not in anchors(file):
            broken.append("{}: no heading or id '{}' in {}".format(target, anchor, file.name))
    return broken


def run_all_help(*command):
    """What `run_all.py [COMMAND] -h` prints (run as a program: the parser may move inside runner/)."""
    done = subprocess.run([sys.executable, str(REPO / "run_all.py"), *command, "-h"], cwd=str(REPO),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_all_commands():
    """The commands `run_all.py -h` lists, from its usage line's {a,b,...}."""
    choices = re.search(r"\{([\w,-]+)\}", run_all_help())
    assert choices, "run_all.py -h lists no commands"
    return set(choices.group(1).split(","))


def command_sections(markdown):
    """{command: its text} of the sections of docs/commands.md headed with a command's name alone (`## run`)."""
    parts = re.split(r"^## +(.+?) *$", FENCE.sub(lambda m: m.group(0).replace("\n#", "\n\\#"), markdown), flags=re.M)
    return {plain(head): body for head, body in zip(parts[1::2], parts[2::2]) if re.fullmatch(r"[a-z]+", plain(head))}


def test_readme_has_at_most_200_lines():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, "README.md has {} lines: move details to docs/".format(lines)


def test_readme_tasks_table_names_every_task():
    _, *rows = table_headed(README.read_text(encoding="utf-8"), "task")
    assert [plain(row[0]) for row in rows] == list(tasks.TASKS)


def test_readme_frameworks_table_has_a_row_per_registered_framework_and_a_column_per_task():
    rows = frameworks_table(README.read_text(encoding="utf-8"))
    registered = [f.label for f in catalog.FRAMEWORKS] + [a.label for a in catalog.ABSENT]
    assert list(rows) == registered, "the README's frameworks table, in registry order"


def test_readme_frameworks_table_says_yes_exactly_where_the_registry_has_the_task():
    rows = frameworks_table(README.read_text(encoding="utf-8"))
    wrong = []
    for framework in list(catalog.FRAMEWORKS) + list(catalog.ABSENT):
        has = {job.task for job in catalog.select([framework.key])}
        lacks = {task for _, task, _ in catalog.lacking([framework.key])}
        for task in tasks.TASKS:
            cell = rows[framework.label][task]
            says_yes = cell == "yes"
            gives_reason = re.fullmatch(r"no: *\S.*", cell) is not None
            if says_yes != (task in has) or (not says_yes and not gives_reason):
                wrong.append("{} / {}: '{}' (registry: {})".format(
                    framework.label, task, cell, "has it" if task in has else
                    "lacks it" if task in lacks else "absent"))
    assert wrong == [], "cells are 'yes' or 'no: why':\n" + "\n".join(wrong)


def test_readme_frameworks_table_names_each_framework_s_environments():
    rows = frameworks_table(README.read_text(encoding="utf-8"))
    for framework in catalog.FRAMEWORKS:
        named = set(re.findall(r"`([^`]+)`", rows[framework.label]["environment"]))
        assert named == {variant.env for variant in framework.variants}, framework.label
    for absent in catalog.ABSENT:
        assert not re.findall(r"`([^`]+)`", rows[absent.label]["environment"]), absent.label


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_readme_links_every_rosetta_page():
    targets = set(LINK.findall(strip_code(README.read_text(encoding="utf-8"))))
    assert {"docs/rosetta/{}.html".format(task) for task in tasks.TASKS} | {"docs/rosetta/index.html"} <= targets


def test_commands_md_has_a_section_for_each_command_of_run_all_and_no_other():
    sections = set(command_sections(COMMANDS.read_text(encoding="utf-8")))
    assert sections == run_all_commands(), "docs/commands.md's '## <command>' sections against run_all.py -h"


@pytest.mark.parametrize("command", ["run", "setup", "report", "rosetta", "site", "list"])
def test_commands_md_mentions_every_option_of_a_command_in_its_section(command):
    """Each long option `run_all.py COMMAND -h` shows is in that command's section (`test` hands its arguments to
    pytest, and asking it for -h builds the environments first)."""
    section = command_sections(COMMANDS.read_text(encoding="utf-8"))[command]
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", run_all_help(command))) - {"--help"}
    assert sorted(option for option in options if option not in section) == []


def test_commands_md_names_every_environment_in_its_table():
    header, *rows = table_headed(COMMANDS.read_text(encoding="utf-8"), "environment")
    assert [plain(row[0]) for row in rows] == list(catalog.ENVIRONMENTS)


def test_the_helpers_find_what_is_wrong(tmp_path):
    """The helpers above fail where they should: a missing file, a missing anchor (a '#' line in a code block is no
    heading), a cell that no longer says yes; links in code and to the web are not followed."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A section: with `code`!\n\n```\n# not a heading\n```\n")
    (tmp_path / "page.html").write_text('<h2 id="here">here</h2>')
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-section-with-code) [ok](page.html#here) [web](https://example.com/x)\n"
                    "[gone](missing.md) [bad](other.md#not-a-heading) [bad](page.html#there) `[code](nowhere.md)`\n"
                    "[self](#title) [bad](#no-title)\n\n# Title\n")
    assert broken_links(page) == ["missing.md: no such file", "other.md#not-a-heading: no heading or id 'not-a-heading' "
                                  "in other.md", "page.html#there: no heading or id 'there' in page.html",
                                  "#no-title: no heading or id 'no-title' in page.md"]
    assert slug("Keras 2 on CNTK and on Theano") == "keras-2-on-cntk-and-on-theano"
    assert slug("CNTK and Python 3.6, Theano and Python 3.8") == "cntk-and-python-36-theano-and-python-38"
    assert set(command_sections("## run\n\n```\n## setup\n```\n## What it does\n")) == {"run"}
    readme = README.read_text(encoding="utf-8")
    assert frameworks_table(readme.replace("| Caffe2 | yes |", "| Caffe2 | no: gone |"))["Caffe2"]["cnn"] == "no: gone"
