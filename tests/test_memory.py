"""common/memory.py: the peak resident memory of the timed blocks, as every notebook's Timer measures it."""

import sys

import pytest

from common import memory, timing

LINUX = sys.platform.startswith("linux")


@pytest.fixture(autouse=True)
def fresh_tally():
    memory.forget_blocks()
    yield
    memory.forget_blocks()


def touched(megabytes):
    """A buffer whose pages are all resident."""
    buffer = bytearray(megabytes << 20)
    buffer[::4096] = b"x" * len(buffer[::4096])
    return buffer


@pytest.mark.skipif(not LINUX, reason="VmHWM and clear_refs are Linux's")
def test_the_peak_of_a_timed_block_is_what_it_allocated_not_what_came_before():
    before = touched(200)  # a peak before any timed block ...
    del before
    with timing.Timer():
        inside = touched(50)  # ... and a smaller one inside the block
    del inside
    peak = memory.timed_peak()
    assert peak["peak_rss_scope"] == memory.TIMED_SCOPE
    resident_after = memory.resident_peak_bytes()
    assert peak["peak_rss_bytes"] >= 50 << 20
    assert peak["peak_rss_bytes"] < resident_after + (150 << 20)  # the 200 MB before the block is not in it
    assert memory.reset_peak() and memory.resident_peak_bytes() < peak["peak_rss_bytes"] + (1 << 20)


@pytest.mark.skipif(not LINUX, reason="VmHWM and clear_refs are Linux's")
def test_the_largest_block_counts_and_the_summaries_report_it():
    with timing.Timer():
        big = touched(120)
    del big
    with timing.Timer():
        small = touched(10)
    del small
    summary = timing.training_timings([1.0, 1.0])
    assert summary["peak_rss_bytes"] >= 120 << 20 and summary["peak_rss_scope"] == memory.TIMED_SCOPE
    assert timing.inference_timings([1.0], 8, 0.5)["peak_rss_bytes"] == summary["peak_rss_bytes"]


def test_without_a_resettable_mark_the_peak_says_it_is_the_whole_process(monkeypatch):
    monkeypatch.setattr(memory, "CLEAR_REFS_FILE", "/nonexistent/clear_refs")
    with timing.Timer():
        pass
    peak = memory.timed_peak()
    assert peak["peak_rss_scope"] == memory.PROCESS_SCOPE
    assert peak["peak_rss_bytes"] is None or peak["peak_rss_bytes"] > 1 << 20


def test_no_timed_block_no_figure():
    assert memory.timed_peak() == {"peak_rss_bytes": None, "peak_rss_scope": memory.TIMED_SCOPE}


class FakeDeviceCounter(object):
    """A framework's peak-allocation counter, driven by the test: use() allocates, reset() lowers the peak to now."""

    def __init__(self):
        self.current = self.peak = 0

    def use(self, nbytes):
        self.current = nbytes
        self.peak = max(self.peak, nbytes)

    def reset(self):
        self.peak = self.current


def test_a_gpu_run_reports_the_framework_counter_peak_over_the_timed_blocks():
    counter = FakeDeviceCounter()
    counter.use(900)  # model loading, before any timed block
    counter.use(100)
    memory.set_device_counter(lambda: counter.peak, "fake.max_allocated", reset=counter.reset)
    with timing.Timer():
        counter.use(400)
        counter.use(150)
    with timing.Timer():
        counter.use(300)
    summary = timing.inference_timings([1.0], 2, 0.5)
    assert summary["device_peak_bytes"] == 400
    assert summary["device_peak_source"] == "fake.max_allocated (timed blocks)"


def test_a_counter_that_cannot_be_reset_says_its_peak_is_the_process_s_and_a_cpu_run_has_none():
    assert "device_peak_bytes" not in memory.timed_peak()  # no counter registered: a CPU run
    counter = FakeDeviceCounter()
    counter.use(900)
    memory.set_device_counter(lambda: counter.peak, "fake.peak_bytes_in_use")
    with timing.Timer():
        counter.use(10)
    peak = memory.timed_peak()
    assert peak["device_peak_bytes"] == 900 and peak["device_peak_source"].endswith("(since the process started)")
