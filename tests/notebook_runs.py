"""Every notebook run once per test session: the smoke tests and the equivalence tests read the same runs.

A notebook that the same-weights check covers runs as the check runs it (its task's SameWeights, common/tasks/: smoke
profile, synthetic data, on the CPU, from the shared weights), and its smoke test asserts on that run's
record; the RNN notebooks have a second run at learning rate 0 for the logits at the shared weights; a ResNet-50 v1
from a model zoo runs from the shared v1 weights.
"""

from runner.checks import equivalence
from runner.run import execution


class NotebookRuns:
    """Runs notebooks into one temporary folder, each (job, run) once, and hands out records and exports."""

    def __init__(self, folder):
        self.folder = folder
        self.entries = {}  # task -> the equivalence check's reference entry
        self.done = {}  # (stem, tag) -> (record, exported arrays) or the ExchangeError it raised

    def run(self, task, job, folder, init, overrides, tag):
        """equivalence.run_exchange, remembered: a second request for the same run gets the first one's result."""
        key = (job.stem, tag)
        if key not in self.done:
            try:
                self.done[key] = equivalence.run_exchange(task, job, folder, init, overrides, tag)
            except equivalence.ExchangeError as error:
                self.done[key] = error
        if isinstance(self.done[key], Exception):
            raise self.done[key]
        return self.done[key]

    def reference(self, task):
        """The check's entry for `task`: the shared weights and PyTorch's runs from them."""
        if task not in self.entries:
            self.entries[task] = equivalence.reference(task, self.folder / ("equivalence-" + task), run=self.run)
        return self.entries[task]

    def smoke(self, job):
        """(record, overrides) of the run a smoke test checks: the check's step (or forward) run, else a plain one."""
        runs = equivalence.runs_of(job)
        if runs:
            tag = list(runs)[-1]  # the training run where there is one, else the forward run
            record, _ = equivalence.exchanged(job, self.reference(job.task), tag, runs[tag])
            return record, runs[tag]
        key = (job.stem, "smoke")
        if key not in self.done:
            run_dir = self.folder / "smoke"
            run_dir.mkdir(parents=True, exist_ok=True)
            parameters = {"data_source": "synthetic", "device": "auto", "threads": 2, "seed": 0, "overrides": {}}
            self.done[key] = (execution.run_job(job, run_dir, "smoke", parameters, timeout=600, show_output=False), None)
        return self.done[key][0], {}
