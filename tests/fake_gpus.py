"""Fake nvidia-smi programs for the tests: the GPUs cloud VMs rent, with their drivers, and nvidia-smi's failures.

Each fake answers `--query-gpu=...` the way the real one does (CSV, no header, no units), including the
old drivers' refusal of the compute_cap field, so that common.gpu parses what a real machine prints.
"""

import os
import stat

# name, driver, compute capability, memory MiB, max SM clock MHz: as nvidia-smi reports them on such machines
MACHINES = {
    "H100": ("NVIDIA H100 80GB HBM3", "580.65.06", "9.0", 81559, 1980),
    "A100": ("NVIDIA A100-SXM4-40GB", "535.183.01", "8.0", 40960, 1410),
    "T4": ("Tesla T4", "470.256.02", "7.5", 15360, 1590),  # drivers before 510 lack the compute_cap field
    "L4": ("NVIDIA L4", "550.90.07", "8.9", 23034, 2040),
}
FIELDS = ("index", "name", "driver_version", "memory.total", "clocks.max.sm", "compute_cap")


def _write(path, script):
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_nvidia_smi(folder, machine):
    """Write an nvidia-smi for `machine` (a MACHINES key) into `folder`; return its path."""
    name, driver, capability, memory, clock = MACHINES[machine]
    values = {"index": "0", "name": name, "driver_version": driver, "memory.total": str(memory),
              "clocks.max.sm": str(clock), "compute_cap": capability}
    old = int(driver.split(".")[0]) < 510
    lines = []
    # the fake prints the fields in the order asked, as nvidia-smi does
    lines.append('query=""; for a in "$@"; do case "$a" in --query-gpu=*) query="${a#--query-gpu=}";; esac; done')
    if old:
        lines.append('case "$query" in *compute_cap*) echo \'Field "compute_cap" is not a valid field to query.\'; '
                     'echo; echo "See \'nvidia-smi --help-query-gpu\' for more information."; exit 2;; esac')
    lines.append('out=""; IFS=","; for f in $query; do case "$f" in')
    for field in FIELDS:
        lines.append('  {}) v="{}";;'.format(field, values[field]))
    lines.append('  *) echo "Field \\"$f\\" is not a valid field to query."; exit 2;;')
    lines.append('esac; if [ -z "$out" ]; then out="$v"; else out="$out, $v"; fi; done; echo "$out"')
    return _write(folder / "nvidia-smi", "\n".join(lines) + "\n")


def failing_nvidia_smi(folder):
    """An nvidia-smi that is there but cannot reach the driver (exit 9, as after a driver update without reboot)."""
    return _write(folder / "nvidia-smi", 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA '
                                         'driver. Make sure that the latest NVIDIA driver is installed and running."\n'
                                         "exit 9\n")


def use_nvidia_smi(monkeypatch, path):
    """Make common.gpu (and every process started from here, kernels included) ask `path`; None: no nvidia-smi."""
    if path is None:
        monkeypatch.setenv("ROSETTA_NVIDIA_SMI", "")
        monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                                   if not os.path.exists(os.path.join(p, "nvidia-smi"))))
    else:
        monkeypatch.setenv("ROSETTA_NVIDIA_SMI", str(path))
