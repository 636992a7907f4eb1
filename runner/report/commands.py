"""The report, rosetta and site commands: rebuild a results folder's report or merge several folders into one table,
from their records and verdict files alone; write the Rosetta pages and the concept index from the stored notebooks;
write the static site from a run folder, or keep a run folder as the reference run the site is built from."""

import datetime
import sys
import time

from runner import catalog, run_folder
from runner.report import html_pages, plots, reference, rosetta_pages, run_report, table
from runner.report import site as static_site


def report(run_dirs, out=None):
    """Rebuild one results folder's report, or merge several folders' results into one table (and, of two, compare
    each row of the second with the first: comparison.md); exit 1 if a record
    could not be read (it is named on stderr and in the table, the rest is reported)."""
    if len(run_dirs) == 1:
        print(run_report.write_report(run_dirs[0]))
        print("report: {}".format(run_dirs[0] / "report.html"))
    else:
        out = out or catalog.REPO / "results" / "merged-{}".format(
            datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
        out.mkdir(parents=True, exist_ok=True)
        text = html_pages.merged_markdown(run_dirs)
        (out / "merged.md").write_text(text)
        (out / "merged.html").write_text(html_pages.merged_page(run_dirs))
        print(text)
        print("merged table: {} and {}".format(out / "merged.md", out / "merged.html"))
        if len(run_dirs) == 2:  # before and after: each row's ratio with its interval and verdict
            lines = ["## {} (B) against {} (A)".format(run_dirs[1].name, run_dirs[0].name)]
            for task_table in table.compared(*run_dirs):
                lines += ["", "### " + task_table.title, ""] + table.markdown_lines(task_table) + [
                    ""] + task_table.notes
            (out / "comparison.md").write_text("\n".join(lines) + "\n")
            print("\n".join(lines))
            print("comparison: {}".format(out / "comparison.md"))
    return warn_unreadable(problem for run_dir in run_dirs for problem in run_folder.read_records(run_dir)[1])


def warn_unreadable(problems):
    """Print each unreadable record on stderr; return 1 if there was one, else 0."""
    problems = list(problems)
    for problem in problems:
        print("run_all.py: warning: {}".format(problem), file=sys.stderr)
    return 1 if problems else 0


def rosetta(out=None):
    """Write the Rosetta pages (one per task) and the concept index from the stored notebooks, and the
    predicted-scaling plot of docs/."""
    for path in rosetta_pages.write_pages(out or rosetta_pages.DOCS_DIR):
        print("wrote", path)
    if out is None:
        print("wrote", plots.plot_scaling(plots.SCALING_PLOT))
    return 0


def site(run_dir=None, out=None, keep=False):
    """Write the static site (runner/report/site.py) into `out` (default site/) from `run_dir` (default the reference
    run, docs/reference/); with `keep`, first make `run_dir` the reference run, kept small (runner/report/reference.py),
    and build from it. Exit 1 with a one-line error where there is no run folder to build from."""
    started = time.monotonic()
    out = out or static_site.SITE_DIR
    try:
        if keep:
            files, size = reference.keep(run_dir)
            print("kept {} as the reference run: {} files, {:.1f} MB in {}".format(
                run_dir, files, size / 1e6, reference.REFERENCE_DIR))
            if size > reference.SIZE_LIMIT:
                print("run_all.py: warning: the reference run is {:.1f} MB, over the {:.0f} MB it should stay under".format(
                    size / 1e6, reference.SIZE_LIMIT / 1e6), file=sys.stderr)
            run_dir = reference.REFERENCE_DIR
        written = static_site.build(run_dir, out)
    except (static_site.SiteError, reference.KeepError) as error:
        print("run_all.py: error: {}".format(error), file=sys.stderr)
        return 1
    size = sum((out / path).stat().st_size for path in written)
    pages = sum(1 for path in written if path.endswith(".html"))
    print("site: {} pages, {} files, {:.1f} MB in {} ({:.1f} s); open {}".format(
        pages, len(written), size / 1e6, out, time.monotonic() - started, out / "index.html"))
    return 0
