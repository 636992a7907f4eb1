"""What runs a run's notebooks, behind one interface: `Sequential` runs them here one after another, `OnRay` as Ray
tasks (runner/run/on_ray.py). The run (runner/run/batch.py) hands an executor its jobs, in their rounds' order, and
gets their records back, each also written into its round's folder; a signal (KeyboardInterrupt) makes the executor
write the running jobs' rows as interrupted and re-raise. Records of jobs that did not run are written by
execution.write_not_run, whichever executor it is."""

import sys
import time

from common import results
from runner import run_folder


def clock(seconds):
    """Seconds as the progress lines show them, minutes:seconds."""
    return "{:d}:{:02d}".format(int(seconds // 60), int(seconds % 60))


class Sequential:
    """Each job on its kernel on this machine, one after another, in the order given."""

    def __init__(self, profile, parameters_of, timeout, show_output=True, started=None, stop_name=lambda: "Ctrl-C",
                 watch=None):
        self.profile, self.parameters_of, self.timeout, self.show_output = profile, parameters_of, timeout, show_output
        self.watch = watch  # the machine probe taken before and after each notebook (runner/run/machine_probe.py)
        self.started = started or time.time()
        self.stop_name = stop_name
        self.running = None  # the job running now, for the run's message if a write fails

    def run(self, jobs, run_dir):
        """Run `jobs` into their rounds' folders of `run_dir`; return their records, in order."""
        from runner.run import execution

        records, started = [], None
        try:
            for number, job in enumerate(jobs, 1):
                print("[{}/{} {}] {} on kernel {} ...".format(number, len(jobs), clock(time.time() - self.started),
                                                             job.progress_name, job.environment.kernel_name))
                sys.stdout.flush()
                self.running, started = job, time.time()
                record = execution.run_job(job, run_folder.round_folder(run_dir, job.round), self.profile,
                                           self.parameters_of(job), self.timeout, show_output=self.show_output,
                                           watch=self.watch, say=lambda line: print("    " + line, flush=True))
                self.running = None
                records.append(record)
                outcome = results.summary_line(record) if record["status"] == "ok" else record["error"]
                print("[{}/{} {}] {}: {} after {:.0f} s; {}".format(
                    number, len(jobs), clock(time.time() - self.started), job.progress_name, record["status"].upper(),
                    record.get("duration_s") or 0, outcome + execution.starts_note(record)))
        except KeyboardInterrupt:
            execution.end_kernels()  # the running notebook's kernel, also one papermill was still starting
            if self.running is not None:
                job = self.running
                execution.write_not_run(run_folder.round_folder(run_dir, job.round), job, self.profile, "interrupted",
                                        "interrupted ({}) after {:.0f} s".format(self.stop_name(), time.time() - started),
                                        notebook=job.stem + ".ipynb")
            raise
        return records


class OnRay:
    """Each job a Ray task on a cluster: one started on this machine, or the one at `address`; with `kinds`
    ({GPU kind: folder}), every job once per GPU kind of the cluster, into that kind's folder."""

    def __init__(self, cluster, profile, parameters_of, timeout, device, threads, stop_name=lambda: "Ctrl-C",
                 kinds=None):
        self.cluster, self.profile, self.parameters_of, self.timeout = cluster, profile, parameters_of, timeout
        self.device, self.threads, self.stop_name, self.kinds = device, threads, stop_name, kinds
        self.running = None  # Ray's tasks write nothing here while they run

    def run(self, jobs, run_dir):
        """Run `jobs` as Ray tasks, landing each one's outputs in its round's folder as it finishes; return their
        records."""
        from runner.run import on_ray

        def on_node(job):  # its papermill parameters, the profile and variant included, less the record's path
            return on_ray.parameters_without_record(job, self.profile, self.parameters_of(job))

        return list(on_ray.run_jobs(self.cluster, jobs, run_dir, self.profile, on_node, self.timeout, self.device,
                                    self.threads, stop_name=self.stop_name, kinds=self.kinds).values())
