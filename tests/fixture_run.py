"""`python tests/fixture_run.py ARGS`: run_all.py's command line on the fixture notebooks (tests/fixtures), for tests
that need the runner in a process of its own (to send it a signal)."""

import faulthandler
import signal
import sys
from pathlib import Path

# Ctrl-C raises KeyboardInterrupt as in a terminal, also where these tests run as a background job, which
# starts with SIGINT ignored (and Python then keeps ignoring it)
signal.signal(signal.SIGINT, signal.default_int_handler)
# SIGUSR1 writes every thread's stack to stderr: what a test that timed out shows of where the runner hangs
faulthandler.register(signal.SIGUSR1, all_threads=True)

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conftest import FIXTURE_FRAMEWORKS, FIXTURES  # noqa: E402

from runner import catalog, cli  # noqa: E402

SLEEPS = catalog.Framework("sleeps", "Sleeps", "Sleeps", (catalog.Variant(None, "runner"),))  # sleeps `epochs` seconds
catalog.NOTEBOOKS, catalog.FRAMEWORKS = FIXTURES, FIXTURE_FRAMEWORKS + (SLEEPS,)
sys.exit(cli.main(sys.argv[1:]))
