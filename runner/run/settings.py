"""What a run is asked to do, as the command line checked it: plain settings, so that nothing past runner/cli.py
reads the command line's namespace. Importing it needs the standard library only."""

import dataclasses
from pathlib import Path
from typing import Optional


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """The run command's settings: what to run (the jobs, expanded by precision, compile mode and sweep), with which
    parameters, how (here or on Ray, how many rounds) and where the results go."""

    jobs: tuple  # every job of the run, round 1 (runner/catalog.py Job); with --resume, all of the stored run's
    frameworks: Optional[list]  # as named on the command line (None: all), for the rows of absent frameworks
    tasks: Optional[list]  # as named (None: all)
    profile: str
    data: str
    device: str
    threads: int
    threads_default: bool  # --threads was not given: on Ray each node then uses its own cores
    seed: int
    overrides: dict  # --set KEY=VALUE
    timeout: float  # seconds per notebook
    no_equivalence: bool
    precisions: list
    compile_modes: Optional[list]
    sweep: Optional[tuple]  # (hyperparameter, values)
    repeat: int = 1  # rounds: every job runs once per round, each round in its own seeded order
    kernel_envs: tuple = ()  # --kernel-env: [variable, value] settings, each job's row once more with it set
    results: Optional[Path] = None  # the folder new run folders go in
    resume: Optional[Path] = None  # the run folder to finish, or None for a new run
    setup: bool = True  # build missing environments (False: --no-setup, fail instead)
    build: Optional[str] = None  # 'gpu' or 'cpu' where the command line forces a kind of build
    wheels: Optional[Path] = None
    quiet: bool = False
    on: Optional[str] = None  # 'ray', or None to run here
    address: Optional[str] = None  # a Ray cluster's head, with on='ray'
    each_gpu_kind: bool = False
    round_orders: Optional[list] = None  # a resumed run's stored order of each round (lists of stems)
    recheck: bool = False  # check same weights anew instead of reusing kept verdicts (runner/checks/verdict_cache.py)

    # what the run file stores and --resume takes back (runner/run_folder.py RUN_FILE)
    STORED = ("frameworks", "tasks", "profile", "data", "device", "threads", "seed", "overrides", "timeout",
              "no_equivalence", "precisions", "compile_modes", "sweep", "repeat", "kernel_envs")

    def stored(self):
        """The settings the run file keeps, as JSON-ready values."""
        return {name: getattr(self, name) for name in self.STORED}
