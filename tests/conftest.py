"""Shared fixtures and helpers: a private data cache per test; the environment a notebook test needs; the train rows
that run on one device only; which tests one pytest-xdist worker must run together; the kernels' JAX compilation
cache."""

import hashlib
import json
import os
import subprocess

import pytest
from notebook_runs import NotebookRuns

from runner import catalog
from runner.checks import verdict_cache
from runner.run import ceiling, environments, for_tests, interpreters
from runner.run.browser import find_browser

# Runs of fixture notebooks leave the machine's ceiling unmeasured (tests/test_ceiling.py measures it for real)
os.environ.setdefault(ceiling.SKIP_VARIABLE, "1")
# and keep no same-weights verdict between runs: a test plants faults that the verdicts' key cannot see
os.environ.setdefault(verdict_cache.PATH_VARIABLE, "")


def cpu_key():
    """A short digest of this CPU's model and instruction-set flags (/proc/cpuinfo's first), '' where unreadable."""
    try:
        with open("/proc/cpuinfo") as lines:
            found = [line for line in lines if line.startswith(("model name", "flags"))][:2]
    except OSError:
        return ""
    return hashlib.sha256("".join(found).encode()).hexdigest()[:12]


# JAX's persistent compilation cache, for the tests' kernels only (they inherit this process's environment; `run` never
# sets it: its tables report compile and first-epoch times): XLA's executables kept in the user's cache, per CPU (XLA
# compiles for the host's instruction set; JAX keys each by its program, options, devices and jaxlib version), so
# that a notebook's later runs in the session, and a clean clone's tests, load what an earlier run compiled
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(catalog.cache_dir() / "jax-tests" / ("cpu-" + cpu_key())))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # every compile: a smoke run's are short

# Test files whose tests share runs that one of them makes (session fixtures, the check's folders): with pytest-xdist
# (`run_all.py test` runs two workers) each set goes to one worker, every other test to whichever is free
RUN_TOGETHER = {"test_notebooks.py": "notebook runs", "test_equivalence.py": "notebook runs",
                "test_data_parallel.py": "data-parallel steps", "test_browser.py": "browser", "test_site.py": "browser",
                "test_on_ray.py": "Ray clusters on the loopback addresses"}

# Train rows whose notebook runs on one device only (keras.distribution is JAX's), and the words of its refusal of two
TRAIN_ONE_DEVICE = {"Keras (tensorflow)": "implemented for the JAX backend only",
                    "Keras (torch)": "implemented for the JAX backend only"}


@pytest.fixture(autouse=True)
def stays_in_its_folder():
    """Fail a test that leaves this process in another working folder (which its tmp_path, removed once it passes,
    may be: every later test of the worker would then fail to start a process), and put the process back."""
    before = os.getcwd()
    yield
    try:
        after = os.getcwd()
    except FileNotFoundError:
        after = None
    if after != before:
        os.chdir(before)
        pytest.fail("the test left this process in {} (it was in {})".format(after or "a removed folder", before))


@pytest.fixture
def data_cache(tmp_path, monkeypatch):
    """An empty download cache that common.datasets uses instead of data/."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("ROSETTA_DATA_DIR", str(cache))
    return cache


@pytest.fixture(scope="session")
def pinned_wheels():
    """{package: path} of the wheels `run_all.py test` obtained for the tests before pytest started, each checked
    against its pinned hashes (runner/run/for_tests.py): the tests install from them without an index, and fail,
    naming that command, where one is missing. Session-wide, so that it reads .envs/ before a test moves it."""
    try:
        return for_tests.wheels()
    except for_tests.MissingForTests as error:
        pytest.fail(str(error))


def require_environment(env):
    """Skip the test where `env` needs what this machine can never have (a Python no known source has, or what
    `run_all.py test` found lacking), with the reason; fail it where `env` is simply not built."""
    if environments.is_ready(env):
        return
    if environments.find_python(env.python, env.python_shared) is None and interpreters.source(env.python) is None:
        pytest.skip("environment {} needs Python {}, which this machine lacks and no known source has".format(
            env.name, env.python))
    lacks = json.loads(os.environ.get(environments.UNAVAILABLE_VARIABLE, "{}")).get(env.name)
    if lacks:  # `run_all.py test` could not build it, for want of something this machine lacks (MachineLacks)
        pytest.skip("environment {} {}".format(env.name, lacks))
    pytest.fail("environment {} is not built: run `python3 run_all.py setup {}`".format(env.name, env.name))


def json_from_environment(name, code, *args):
    """What a Python snippet `code` prints as JSON when run with `args` in environment `name`'s interpreter, from the
    repository's root (so that it imports common, frameworks and runner); the test fails where the environment is not
    built or the snippet fails."""
    env = catalog.ENVIRONMENTS[name]
    require_environment(env)
    done = subprocess.run([str(environments.interpreter(env)), "-c", code] + list(args), cwd=str(catalog.REPO),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def notebook_runs(tmp_path_factory):
    """The session's notebook runs (tests/notebook_runs.py), shared by the smoke and equivalence tests."""
    return NotebookRuns(tmp_path_factory.mktemp("notebooks"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scheduler for `-n` (its default 'load' distribution): each RUN_TOGETHER set on one worker. Its own
    'loadgroup' does this with marks, but its nodeid suffix has no effect under pytest 9.2."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class RunTogetherScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return RUN_TOGETHER.get(nodeid.split("::", 1)[0].rsplit("/", 1)[-1], nodeid)

    return RunTogetherScheduling(config, log)


FIXTURES = catalog.REPO / "tests" / "fixtures"
FIXTURE_FRAMEWORKS = tuple(
    catalog.Framework(key, key.capitalize(), key.capitalize() if key != "ok" else "OK", (catalog.Variant(None, "runner"),))
    for key in ("ok", "raises", "hangs", "silent", "dies", "variants", "killed", "bloats", "fills")
)


@pytest.fixture
def fixture_catalog(monkeypatch):
    """Point the catalog at the fixture notebooks, which run on the runner environment's own kernel."""
    if not environments.is_ready(catalog.ENVIRONMENTS["runner"]):
        pytest.fail("the runner environment is not built: run `python3 run_all.py setup runner`")
    monkeypatch.setattr(catalog, "NOTEBOOKS", FIXTURES)
    monkeypatch.setattr(catalog, "FRAMEWORKS", FIXTURE_FRAMEWORKS)


# Debian's Chromium, headless, for the pages' browser tests
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium driven by Playwright, one per test module (tests/test_browser.py, test_site.py)."""
    chromium = find_browser()
    if chromium is None:
        pytest.fail("no Chromium: `python3 run_all.py test` installs Debian's chromium when run as root; "
                    "elsewhere install it or set ROSETTA_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        yield instance
        instance.close()
