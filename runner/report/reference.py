"""The reference run: one finished run folder kept in the repository (docs/reference/), so that the site
(runner/report/site.py) builds from a clean clone without running anything.

`python3 run_all.py site --keep RUN_FOLDER` replaces docs/reference/ with what the site and the report read of the run:
its executed notebooks with their outputs kept small, its records (each round's, for the intervals), the run file, the
measured ceiling, the checks' verdict files, its tables and its PNG plots; and kept.json, naming the run and the commit
of the checkout it was kept from. An output's text keeps what a terminal shows (a progress bar's last state) and at most
TEXT_LIMIT characters; a PNG plot stays unless larger than IMAGE_LIMIT; HTML and Markdown outputs stay when short; any
other kind of data (JSON, widgets, SVG, JavaScript) is left out, a line saying what was. A notebook that does not
read (cut short by a full disk) is not kept.
"""

import json
import re
import shutil
from pathlib import Path

from runner import catalog, run_folder

REFERENCE_DIR = catalog.REPO / "docs" / "reference"
KEEP_COMMAND = "python3 run_all.py site --keep results/<run>"  # refreshes REFERENCE_DIR (docs/commands.md#site)
KEPT_FILE = "kept.json"  # which run the reference is, and the checkout's commit when it was kept
RESULT_FILES = ("results.md", "results.csv", "results.json", run_folder.RUN_FILE, run_folder.CEILING_FILE)
VERDICT_FILES = (run_folder.EQUIVALENCE_FILE, run_folder.EQUIVALENCE_INTERRUPTED_FILE, run_folder.DATA_PARALLEL_FILE)
TEXT_LIMIT = 6000  # characters of one output's text that stay; the middle of a longer one is left out, said so
IMAGE_LIMIT = 300000  # characters of one base64 PNG that stay (about 220 kB)
MARKUP_LIMIT = 20000  # characters of an HTML or Markdown output that stay
SIZE_LIMIT = 10 * 1024 * 1024  # the reference run is kept under this size; a larger one is kept with a warning


class KeepError(ValueError):
    """The run folder cannot be kept: it is not a finished run, or the target is not a reference run."""


def read_kept(run_dir):
    """What kept.json says of a reference run ({"run": ..., "commit": ...}); {} for a plain run folder."""
    try:
        return json.loads((Path(run_dir) / KEPT_FILE).read_text())
    except (OSError, ValueError):
        return {}


def _text(value):
    return "".join(value) if isinstance(value, list) else (value or "")


def as_shown(text):
    """Text as a terminal shows it: backspaces applied, and of each line only what follows its last carriage
    return (a progress bar redrawn in place keeps its last state)."""
    while "\x08" in text:
        shorter = re.sub(r"[^\n\x08]\x08", "", text)
        if shorter == text:  # backspaces at a line's start: nothing to take back
            text = text.replace("\x08", "")
            break
        text = shorter
    return "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n"))


def shortened(text, limit=TEXT_LIMIT):
    """`text`, or its start and end with a line saying how much of its middle was left out."""
    if len(text) <= limit:
        return text
    head, tail = text[:limit * 2 // 3], text[-(limit // 3):]
    return "{}\n[... {} characters left out of the reference copy ...]\n{}".format(
        head, len(text) - len(head) - len(tail), tail)


def small_output(output):
    """One output of a code cell, kept small (the module's rules); the output itself is changed and returned."""
    kind = output.get("output_type")
    if kind == "stream":
        output["text"] = shortened(as_shown(_text(output.get("text"))))
    elif kind == "error":
        lines = output.get("traceback") or []
        output["traceback"] = [shortened(line, TEXT_LIMIT // 2) for line in (lines[:10] + lines[-20:]
                                                                             if len(lines) > 30 else lines)]
    elif kind in ("display_data", "execute_result"):
        data, kept, left = output.get("data") or {}, {}, []
        for mime in sorted(data):
            text = _text(data[mime])
            if mime == "text/plain":
                kept[mime] = shortened(text)
            elif (mime == "image/png" and len(text) <= IMAGE_LIMIT) or (
                    mime in ("text/html", "text/markdown") and len(text) <= MARKUP_LIMIT):
                kept[mime] = data[mime]
            else:
                left.append("{} of {} characters".format(mime, len(text)))
        if left:
            note = "[left out of the reference copy: {}]".format(", ".join(left))
            kept["text/plain"] = (kept["text/plain"] + "\n" + note) if "text/plain" in kept else note
        output["data"] = kept
        output["metadata"] = {mime: value for mime, value in (output.get("metadata") or {}).items() if mime in kept}
    return output


def small_notebook(text, run_dir=None):
    """An executed notebook's JSON with its outputs kept small and its widget state left out, as nbformat writes it;
    the run folder's path on the machine that ran it (`run_dir`), in the parameters papermill injected, made relative."""
    notebook = json.loads(text)
    notebook.get("metadata", {}).pop("widgets", None)
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = [small_output(output) for output in cell.get("outputs") or []]
            if run_dir is not None and "injected-parameters" in cell.get("metadata", {}).get("tags", []):
                cell["source"] = _text(cell["source"]).replace(str(Path(run_dir).resolve()) + "/", "")
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def files_to_keep(run_dir):
    """[(source, path inside the reference)] of what the reference keeps of a run folder, sorted."""
    run_dir = Path(run_dir)
    found = [(path, path.name) for path in sorted(run_dir.glob("*.ipynb"))]
    found += [(path, path.name) for path in sorted(run_dir.glob("*" + run_folder.RECORD_SUFFIX))]
    found += [(run_dir / name, name) for name in RESULT_FILES if (run_dir / name).is_file()]
    found += [(path, path.name) for path in sorted(run_dir.glob("*.png"))]
    for number, folder in run_folder.round_folders(run_dir).items():
        if number > 1:
            found += [(path, "{}/{}".format(folder.name, path.name))
                      for path in sorted(folder.glob("*" + run_folder.RECORD_SUFFIX))]
    checks = run_dir / run_folder.CHECKS_DIR
    found += [(checks / name, "{}/{}".format(run_folder.CHECKS_DIR, name)) for name in VERDICT_FILES
              if (checks / name).is_file()]
    return found


def keep(run_dir, target=REFERENCE_DIR):
    """Replace the reference run in `target` with the run folder `run_dir`, kept small; return (files, bytes)."""
    run_dir, target = Path(run_dir), Path(target)
    if not (run_dir / run_folder.RUN_FILE).is_file() or not list(run_dir.glob("*" + run_folder.RECORD_SUFFIX)):
        raise KeepError("{} is not a finished run folder (no {} or no records)".format(run_dir, run_folder.RUN_FILE))
    if run_dir.resolve() == target.resolve():
        raise KeepError("{} is the reference run already".format(run_dir))
    if target.exists() and any(target.iterdir()) and not (target / KEPT_FILE).is_file():
        raise KeepError("{} holds files that are not a reference run; move them first".format(target))
    chosen = files_to_keep(run_dir)
    kept = read_kept(run_dir)  # a reference kept again stays the run it was
    ran = json.loads((run_dir / run_folder.RUN_FILE).read_text()).get("commit")  # stored by runs since issue 60
    commit = kept.get("commit") or ran or run_folder.checkout_commit()
    if target.exists():
        shutil.rmtree(str(target))
    for source, name in chosen:
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if source.suffix != ".ipynb":
            shutil.copyfile(str(source), str(path))
            continue
        try:
            path.write_text(small_notebook(source.read_text(encoding="utf-8"), run_dir), encoding="utf-8")
        except ValueError:  # a notebook cut short (a full disk): the site would give it no page, the reference skips it
            continue
    (target / KEPT_FILE).write_text(json.dumps({"run": kept.get("run") or run_dir.name, "commit": commit},
                                               indent=1, sort_keys=True) + "\n")
    files = [path for path in target.rglob("*") if path.is_file()]
    return len(files), sum(path.stat().st_size for path in files)
