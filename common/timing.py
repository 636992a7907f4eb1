"""Honest timing: a timer that synchronises the device before reading the clock, and repeat summaries.

Deep-learning frameworks queue work on the device and return at once, so a timer must wait for the
device before it starts and before it stops. Every framework passes its own `sync` callable
(torch.cuda.synchronize, jax's block_until_ready, mx.nd.waitall, ...); on a CPU it may be None.
"""

import math
import statistics
import time

from common import memory


class Timer(object):
    """Context manager measuring wall time of a block, calling `sync()` before starting and before stopping.

    >>> with Timer(sync) as t:
    ...     train_one_epoch()
    >>> t.elapsed  # seconds

    `begin()` and `end()` do the same for code that cannot wrap a block, such as framework callbacks.
    `clock` (default time.perf_counter) is the seconds counter read at start and stop. Each block also counts
    towards the run's peak resident memory (common/memory.py), which the timings summaries below report.
    """

    def __init__(self, sync=None, clock=None):
        self.sync = sync
        self.clock = clock or time.perf_counter
        self.start = None
        self.elapsed = None

    def begin(self):
        """Synchronise, then start the clock; returns the timer (for callbacks that cannot use `with`)."""
        if self.sync is not None:
            self.sync()
        memory.begin_block()  # the resident-memory peak of this block starts here (common/memory.py)
        self.start = self.clock()
        return self

    def end(self):
        """Synchronise, then stop the clock; returns the elapsed seconds."""
        if self.sync is not None:
            self.sync()
        self.elapsed = self.clock() - self.start
        memory.end_block()
        return self.elapsed

    def __enter__(self):
        return self.begin()

    def __exit__(self, exc_type, exc, traceback):
        self.end()
        return False


def summarize(samples):
    """Return median, min, max, mean, standard deviation and count of a list of timings in seconds."""
    samples = [float(s) for s in samples]
    if not samples:
        raise ValueError("summarize needs at least one sample")
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "mean": statistics.mean(samples),
        "stdev": statistics.stdev(samples) if len(samples) > 1 else 0.0,
        "n": len(samples),
    }


def percentile(samples, fraction):
    """The value below which `fraction` (0 to 1) of the samples lie, interpolating between neighbours."""
    ordered = sorted(float(s) for s in samples)
    if not ordered:
        raise ValueError("percentile needs at least one sample")
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency(batch_seconds):
    """Summarise single-batch times (each timed with the device synchronised): summarize() plus the 99th percentile."""
    return dict(summarize(batch_seconds), p99=percentile(batch_seconds, 0.99))


def training_timings(epoch_seconds, compile_s=None):
    """Summarise per-epoch training times: total, the first epoch apart (warm-up, autotune), the rest's median;
    with the peak resident memory of the timed blocks.

    `compile_s` is the time spent tracing and compiling the training step before the first epoch, for
    frameworks that compile ahead (None where compilation happens inside the first epoch).
    """
    epoch_seconds = [float(s) for s in epoch_seconds]
    steady = epoch_seconds[1:] or epoch_seconds
    return {
        "train_s": sum(epoch_seconds),
        "epochs_s": epoch_seconds,
        "first_epoch_s": epoch_seconds[0],
        "epoch_s": summarize(steady),
        "compile_s": None if compile_s is None else float(compile_s),
        **memory.timed_peak(),
    }


def inference_timings(pass_seconds, images_per_pass, warmup_s, batch_seconds=None):
    """Summarise timed passes over the same images: seconds per 1000 images and images/s as median and spread;
    with the peak resident memory of the timed blocks (warm-up included), and the latency of one batch
    (`latency(batch_seconds)`, "batch_s") where the notebook timed each batch of the passes."""
    per_1000 = [1000.0 * s / images_per_pass for s in pass_seconds]
    return {
        "batch_s": latency(batch_seconds) if batch_seconds else None,
        "warmup_s": float(warmup_s),
        "passes_s": [float(s) for s in pass_seconds],
        "images_per_pass": images_per_pass,
        "s_per_1000_images": summarize(per_1000),
        "images_per_s": summarize([images_per_pass / s for s in pass_seconds]),
        **memory.timed_peak(),
    }


def training_throughput(pass_seconds, images_per_pass, warmup_s):
    """Summarise timed passes of training steps (the train task): seconds per 1000 training images and images/s as
    median and spread, the warm-up apart; with the peak resident memory of the timed blocks. The same summary as
    inference_timings, without single-batch latency: a training step is timed in passes, not one by one."""
    return inference_timings(pass_seconds, images_per_pass, warmup_s)


MAX_PASSES = 100  # timed passes never go beyond this many, however short each is


def passes_for(first_pass_s, params):
    """How many timed passes are enough (as enough_passes counts) if each takes as long as the first, `first_pass_s`
    seconds: at least params["repeats"], at least params["min_timed_s"] seconds in all, at most MAX_PASSES."""
    wanted = params["repeats"]
    if params.get("min_timed_s", 0.0) > 0:
        wanted = max(wanted, math.ceil(params["min_timed_s"] / first_pass_s) if first_pass_s > 0 else MAX_PASSES)
    return min(wanted, MAX_PASSES)


def time_passes(step, params, agree=None, before=None, sync=None, loss_value=float, say=print):
    """Time passes of training steps the way every train notebook does: each pass params["steps"] calls of `step()`
    (which returns its loss), timed with the device synchronised (`sync`) and after `before()`, untimed (a barrier, so
    that every worker starts the pass together). The count of passes is fixed after the first, passes_for its
    seconds, and handed to `agree` (count -> the count every worker takes, e.g. rank 0's, broadcast) where several
    processes step together: each must take as many steps, since each step waits for the others' gradients. A line
    per pass through `say` (None: silent), with `loss_value` of the last loss. Returns (each pass's seconds, the last
    loss)."""
    pass_seconds, passes, loss = [], params["repeats"], None
    while len(pass_seconds) < passes:
        if before is not None:
            before()
        with Timer(sync) as timer:
            for _ in range(params["steps"]):
                loss = step()
        pass_seconds.append(timer.elapsed)
        if len(pass_seconds) == 1:
            passes = passes_for(timer.elapsed, params)
            passes = passes if agree is None else int(agree(passes))
        if say is not None:
            say("pass {}/{}: {:.2f} s, loss {:.3f}".format(len(pass_seconds), passes, timer.elapsed, loss_value(loss)))
    return pass_seconds, loss


def enough_passes(pass_seconds, params):
    """True once timed passes (`pass_seconds`, each pass's seconds) are enough for a figure: at least params["repeats"]
    of them and at least params["min_timed_s"] seconds of timed work in all, as timeit's autorange sizes a measurement by
    time (so no figure rests on a few short passes); or MAX_PASSES of them."""
    if len(pass_seconds) >= MAX_PASSES:
        return True
    return len(pass_seconds) >= params["repeats"] and sum(pass_seconds) >= params.get("min_timed_s", 0.0)


def time_inference(extract, batches, images_per_pass, params, sync=None, say=print):
    """Time `extract` (one batch in, its output out) the way every inference notebook does: a warm-up over the
    first params["warmup_batches"] batches (compilation, autotuning, caches), then timed passes until enough_passes
    over all `batches`, each batch timed too, the device synchronised (`sync`) before every clock read; a line per
    pass through `say`. Returns (inference_timings of the passes, the last batch's output)."""
    output = None
    with Timer(sync) as warmup:
        for batch in batches[:params["warmup_batches"]]:
            output = extract(batch)
    pass_seconds, batch_seconds = [], []
    while not enough_passes(pass_seconds, params):
        with Timer(sync) as timer:
            for batch in batches:
                with Timer(sync) as batch_timer:
                    output = extract(batch)
                batch_seconds.append(batch_timer.elapsed)
        pass_seconds.append(timer.elapsed)
        say("pass {}: {:.2f} s for {} images".format(len(pass_seconds), timer.elapsed, images_per_pass))
    return inference_timings(pass_seconds, images_per_pass, warmup.elapsed, batch_seconds=batch_seconds), output


def train_epochs(train_step, x, y, params, seed, sync=None, loss_value=float, say=print):
    """Train the way every CNN, RNN and Transformer notebook does: params["epochs"] epochs, each a pass over (x, y)
    in shuffled whole batches of params["batch_size"] (datasets.batches, seeded seed + epoch), `train_step` called on
    each NumPy batch (x, y) and each epoch timed with the device synchronised (`sync`); a line per epoch through `say`
    with the last batch's loss (`loss_value` of what that train_step returned). Returns the seconds of each epoch."""
    from common import datasets  # NumPy with it: common.results imports this module, and the command line common.results

    epoch_seconds = []
    for epoch in range(params["epochs"]):
        with Timer(sync) as timer:
            for xb, yb in datasets.batches(x, y, params["batch_size"], shuffle=True, seed=seed + epoch):
                loss = train_step(xb, yb)
        epoch_seconds.append(timer.elapsed)
        say("epoch {}/{}: {:.1f} s, last batch loss {:.3f}".format(epoch + 1, params["epochs"], timer.elapsed,
                                                                   loss_value(loss)))
    return epoch_seconds


class EpochClock(object):
    """Times epochs from a framework's callbacks (Keras' on_epoch_begin and on_epoch_end take these two methods):
    `seconds` holds one entry per finished epoch, each timed with the device synchronised by `sync` (and `clock`,
    as Timer's)."""

    def __init__(self, sync=None, clock=None):
        self.sync, self.clock = sync, clock
        self.seconds = []
        self.timer = None

    def begin_epoch(self, epoch=None, logs=None):
        """Start timing an epoch."""
        self.timer = Timer(self.sync, self.clock).begin()

    def end_epoch(self, epoch=None, logs=None):
        """Stop timing the epoch and keep its seconds."""
        self.seconds.append(self.timer.end())
