import numpy as np
import pytest

from common import datasets, timing


class FakeDevice:
    """A clock that moves only when told, and a device whose queued work takes `busy` seconds to finish."""

    def __init__(self, busy):
        self.now, self.busy, self.events = 100.0, busy, []

    def clock(self):
        return self.now

    def sync(self):
        self.events.append("sync")
        self.now += self.busy  # waiting for the device's queue


def test_timer_syncs_before_start_and_before_stop():
    device = FakeDevice(busy=0.25)
    with timing.Timer(device.sync, clock=device.clock) as t:
        device.events.append("work")
        device.now += 2.0  # the host's part of the work
    assert device.events == ["sync", "work", "sync"]
    assert t.elapsed == 2.25  # the stop sync is inside the measured time, the start sync is not


def test_timer_reads_perf_counter_by_default():
    assert timing.Timer().clock is timing.time.perf_counter


def test_timer_without_sync_and_on_error():
    with pytest.raises(RuntimeError):
        with timing.Timer() as t:
            raise RuntimeError("boom")
    assert t.elapsed is not None and t.elapsed >= 0


def test_summarize_median_and_spread():
    s = timing.summarize([3.0, 1.0, 2.0, 10.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (2.5, 1.0, 10.0, 4)
    assert timing.summarize([2.0])["stdev"] == 0.0
    with pytest.raises(ValueError):
        timing.summarize([])


def test_training_timings_keep_the_first_epoch_apart():
    t = timing.training_timings([5.0, 2.0, 2.2])
    assert t["train_s"] == pytest.approx(9.2)
    assert t["first_epoch_s"] == 5.0
    assert t["epoch_s"]["median"] == pytest.approx(2.1)
    assert timing.training_timings([4.0])["epoch_s"]["median"] == 4.0


def test_inference_timings_per_1000_images():
    t = timing.inference_timings([0.5, 0.4, 0.6], images_per_pass=100, warmup_s=3.0)
    assert t["s_per_1000_images"]["median"] == pytest.approx(5.0)
    assert t["images_per_s"]["median"] == pytest.approx(200.0)
    assert t["warmup_s"] == 3.0


def test_begin_and_end_for_callbacks():
    calls = []
    timer = timing.Timer(lambda: calls.append(1)).begin()
    assert timer.end() >= 0 and calls == [1, 1] and timer.elapsed is not None


def test_compile_time_is_kept_apart():
    assert timing.training_timings([2.0], compile_s=1.5)["compile_s"] == 1.5
    assert timing.training_timings([2.0])["compile_s"] is None


def test_latency_reports_the_median_and_the_99th_percentile_of_single_batch_times():
    times = [0.010] * 98 + [0.020, 0.110]
    summary = timing.latency(times)
    assert summary["median"] == pytest.approx(0.010) and summary["n"] == 100
    assert summary["p99"] == pytest.approx(0.0209)  # between the two slowest, as numpy.percentile interpolates
    assert timing.percentile([3.0, 1.0, 2.0], 0.5) == 2.0 and timing.percentile([5.0], 0.99) == 5.0
    assert timing.inference_timings([1.0, 1.0], 10, 0.1, batch_seconds=times)["batch_s"]["p99"] == summary["p99"]
    assert timing.inference_timings([1.0], 10, 0.1)["batch_s"] is None
    with pytest.raises(ValueError):
        timing.percentile([], 0.5)


def test_time_inference_warms_up_then_times_every_pass_and_batch_with_the_device_synchronised(monkeypatch):
    device = FakeDevice(busy=0.5)
    monkeypatch.setattr(timing.time, "perf_counter", device.clock)
    seen, said = [], []

    def extract(batch):
        seen.append(batch)
        device.events.append("batch {}".format(batch))
        device.now += 1.0
        return batch * 10

    timings, last = timing.time_inference(extract, [1, 2, 3], images_per_pass=96,
                                          params={"warmup_batches": 2, "repeats": 2}, sync=device.sync, say=said.append)
    assert seen == [1, 2] + [1, 2, 3] * 2 and last == 30  # warm-up on the first two, then two whole passes
    # a batch: its own start sync, 1 s of work, its stop sync (1.5 s inside its timer, 2 s inside the pass); a pass:
    # three batches and its stop sync
    assert timings["warmup_s"] == 2.5 and timings["passes_s"] == [6.5, 6.5]
    assert timings["batch_s"]["n"] == 6 and timings["batch_s"]["median"] == 1.5
    assert timings["s_per_1000_images"]["median"] == pytest.approx(1000 * 6.5 / 96)
    assert said == ["pass 1: 6.50 s for 96 images", "pass 2: 6.50 s for 96 images"]
    assert device.events[:4] == ["sync", "batch 1", "batch 2", "sync"]  # the warm-up's clock stops after a sync


def test_passes_go_on_until_there_are_enough_of_them_and_enough_timed_seconds(monkeypatch):
    params = {"repeats": 3, "min_timed_s": 2.0}
    assert not timing.enough_passes([1.0, 1.0], params)  # 2 s, but 2 passes
    assert not timing.enough_passes([0.5, 0.5, 0.5], params)  # 3 passes, but 1.5 s
    assert timing.enough_passes([0.5, 0.5, 0.5, 0.5], params)
    assert timing.enough_passes([0.001] * timing.MAX_PASSES, params)  # however short, never more than MAX_PASSES
    assert timing.enough_passes([1.0, 1.0, 1.0], {"repeats": 3})  # no min_timed_s: the count alone
    device = FakeDevice(busy=0.0)
    monkeypatch.setattr(timing.time, "perf_counter", device.clock)

    def extract(batch):
        device.now += 0.25

    timings, _ = timing.time_inference(extract, [1], images_per_pass=1,
                                       params={"warmup_batches": 0, "repeats": 2, "min_timed_s": 1.0}, say=list)
    assert timings["passes_s"] == [0.25] * 4  # four quarter-second passes make the second


def test_the_count_of_train_passes_comes_from_the_first_pass_s_seconds():
    params = {"repeats": 3, "min_timed_s": 10.0}
    assert timing.passes_for(4.0, params) == 3  # 12 s in the three passes asked for
    assert timing.passes_for(3.0, params) == 4  # ceil(10 / 3)
    assert timing.passes_for(0.5, params) == 20
    assert timing.passes_for(0.001, params) == timing.MAX_PASSES  # however short, never more
    assert timing.passes_for(0.0, params) == timing.MAX_PASSES  # a clock too coarse to see the pass
    assert timing.passes_for(0.001, {"repeats": 2}) == 2  # no min_timed_s: the count alone
    assert timing.passes_for(0.0, {"repeats": 2, "min_timed_s": 0.0}) == 2


def test_time_passes_fixes_the_count_after_the_first_pass_and_every_worker_takes_the_agreed_one(monkeypatch):
    device = FakeDevice(busy=0.5)
    monkeypatch.setattr(timing.time, "perf_counter", device.clock)
    steps, barriers, said, offered = [], [], [], []

    def step():
        steps.append(device.now)
        device.now += 1.0
        return len(steps) / 10

    def agree(count):  # as a broadcast does: this worker's count in, rank 0's out
        offered.append(count)
        return 5

    params = {"repeats": 2, "steps": 3, "min_timed_s": 8.0}
    seconds, loss = timing.time_passes(step, params, agree=agree, before=lambda: barriers.append(len(steps)),
                                       sync=device.sync, say=said.append)
    assert offered == [3]  # 8 s of 3.5 s passes: three, offered once, after the first pass
    assert seconds == [3.5] * 5 and len(steps) == 15 and loss == 1.5  # the agreed five, each of three steps
    assert barriers == [0, 3, 6, 9, 12]  # before every pass, outside its clock
    assert said == ["pass {}/5: 3.50 s, loss {:.3f}".format(n, n * 0.3) for n in range(1, 6)]
    alone, _ = timing.time_passes(step, params, sync=device.sync, say=None)  # one process: its own count
    assert alone == [3.5] * 3


def test_train_epochs_steps_over_shuffled_whole_batches_and_times_each_epoch_with_the_device_synchronised(monkeypatch):
    device = FakeDevice(busy=0.5)
    monkeypatch.setattr(timing.time, "perf_counter", device.clock)
    x, y = np.arange(10) * 10, np.arange(10)
    seen, said = [], []

    def train_step(xb, yb):
        assert (xb == yb * 10).all()  # images and labels stay paired
        seen.append(list(yb))
        device.now += 1.0
        return len(seen) / 4

    seconds = timing.train_epochs(train_step, x, y, {"epochs": 2, "batch_size": 4}, seed=3, sync=device.sync,
                                  say=said.append)
    assert len(seen) == 4 and all(len(batch) == 4 for batch in seen)  # two whole batches an epoch, the last 2 left out
    assert seen[:2] == [list(batch) for _, batch in datasets.batches(x, y, 4, shuffle=True, seed=3)]
    assert seen[2:] == [list(batch) for _, batch in datasets.batches(x, y, 4, shuffle=True, seed=4)]
    assert seconds == [2.5, 2.5]  # two steps of 1 s and the sync before the clock stops
    assert said == ["epoch 1/2: 2.5 s, last batch loss 0.500", "epoch 2/2: 2.5 s, last batch loss 1.000"]
    timing.train_epochs(lambda xb, yb: None, x, y, {"epochs": 1, "batch_size": 5}, seed=0,
                        loss_value=lambda last: 0.25, say=said.append)
    assert said[-1].endswith("last batch loss 0.250")  # a loss the framework reads apart from the step


def test_training_throughput_summarises_passes_of_steps_without_batch_latency():
    timings = timing.training_throughput([2.0, 4.0, 3.0], images_per_pass=100, warmup_s=7.0)
    assert timings["images_per_s"]["median"] == pytest.approx(100 / 3.0) and timings["batch_s"] is None
    assert timings["warmup_s"] == 7.0 and timings["s_per_1000_images"]["min"] == 20.0


def test_the_epoch_clock_times_each_epoch_between_its_callbacks():
    device = FakeDevice(busy=0.25)
    clock = timing.EpochClock(device.sync, clock=device.clock)
    for epoch, seconds in enumerate((3.0, 2.0)):
        clock.begin_epoch(epoch)
        device.now += seconds
        clock.end_epoch(epoch, logs={"loss": 0.1})
    assert clock.seconds == [3.25, 2.25]  # the sync before each stop inside the epoch, the one before each start not
