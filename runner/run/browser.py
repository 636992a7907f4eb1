"""The Chromium that the browser test of the Rosetta pages drives: found on the machine, or Debian's package installed
when the tests run as root."""

import os
import shutil
import subprocess

from runner import catalog
from runner.run import build_steps
from runner.run.build_steps import SetupError


def find_browser():
    """The path of a Chromium for the browser test: $ROSETTA_CHROMIUM, or chromium on PATH; None if there is none."""
    return os.environ.get("ROSETTA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def ensure_browser(say=print):
    """Return a Chromium for the browser test, installing Debian's package when this runs as root with apt-get."""
    found = find_browser()
    if found:
        return found
    if not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get")):
        raise SetupError("the browser test needs Chromium: install your system's chromium package "
                         "or set ROSETTA_CHROMIUM to its path")
    log_path = catalog.ENVS_DIR / "browser.log"
    catalog.ENVS_DIR.mkdir(exist_ok=True)
    say("[setup] browser: installing Debian's chromium for the browser test (log: {})".format(
        build_steps.shown(log_path)))
    environ = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with open(str(log_path), "w") as log:
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]):
            if subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=environ).returncode != 0:
                raise SetupError("`{}` failed; see {}".format(" ".join(command), log_path))
    found = find_browser()
    if not found:
        raise SetupError("chromium was installed but is not on PATH; see {}".format(log_path))
    return found
