"""Peak resident memory of this process over the timed parts of a run, measured the same way in every framework.

On Linux the kernel keeps the process's high-water mark of resident memory (VmHWM in /proc/self/status) and
lets the process lower it to the current size (writing 5 to /proc/self/clear_refs). `common.timing.Timer`
lowers it when a timed block begins and reads it when the block ends, so `timed_peak()` is the largest
resident size reached inside any timed block (epochs, warm-up, inference passes), whatever allocated it:
the framework's arenas, its threads, the batches. Where the mark cannot be lowered, the peak is the whole
process's, and `timed_peak()` says so.

On a GPU the framework's own peak-allocation counter is the figure people compare (PyTorch's
max_memory_allocated, TensorFlow's get_memory_info(...)["peak"], JAX's memory_stats()["peak_bytes_in_use"]):
each framework's module registers it with `set_device_counter` when it chooses a GPU, and `timed_peak()`
reports it beside the resident peak, with the counter's name.
"""

import re
import sys

STATUS_FILE = "/proc/self/status"
CLEAR_REFS_FILE = "/proc/self/clear_refs"
TIMED_SCOPE = "timed blocks"
PROCESS_SCOPE = "whole process (the system cannot reset its peak)"

_blocks = {"peak": None, "resettable": True, "device_peak": None}
_device = {"read": None, "reset": None, "source": None}


def resident_peak_bytes():
    """This process's peak resident memory in bytes since it started or since the last reset_peak(); None if unknown."""
    try:
        with open(STATUS_FILE) as status:
            match = re.search(r"^VmHWM:\s+(\d+) kB", status.read(), re.M)
        if match:
            return int(match.group(1)) * 1024
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, kB elsewhere


def reset_peak():
    """Lower the high-water mark to the current resident size; False where the system does not allow it."""
    try:
        with open(CLEAR_REFS_FILE, "w") as clear_refs:
            clear_refs.write("5")  # 5 resets only the peak resident size (Linux 4.0+), nothing else
        return True
    except OSError:
        return False


def set_device_counter(read, source, reset=None):
    """Register the framework's peak device-memory counter: read() -> bytes, its name (e.g.
    "torch.cuda.max_memory_allocated"), and reset() where the framework can lower it to the current use."""
    _device.update(read=read, reset=reset, source=source)


def begin_block():
    """Start watching a timed block (called by Timer.begin, before its clock starts)."""
    if not reset_peak():
        _blocks["resettable"] = False
    if _device["reset"] is not None:
        _device["reset"]()


def end_block():
    """Fold the block's peaks into the run's (called by Timer.end, after its clock stopped)."""
    peak = resident_peak_bytes()
    if peak is not None:
        _blocks["peak"] = max(peak, _blocks["peak"] or 0)
    if _device["read"] is not None:
        device_peak = _device["read"]()
        if device_peak is not None:
            _blocks["device_peak"] = max(int(device_peak), _blocks["device_peak"] or 0)


def timed_peak():
    """The largest resident size inside any timed block so far and its scope ("peak_rss_bytes", "peak_rss_scope");
    on a GPU also the framework's peak device allocation and its counter ("device_peak_bytes", "device_peak_source",
    over the timed blocks where the counter can be reset, else since the process started)."""
    peaks = {"peak_rss_bytes": _blocks["peak"],
             "peak_rss_scope": TIMED_SCOPE if _blocks["resettable"] else PROCESS_SCOPE}
    if _device["read"] is not None:
        scope = TIMED_SCOPE if _device["reset"] is not None else "since the process started"
        peaks.update(device_peak_bytes=_blocks["device_peak"], device_peak_source="{} ({})".format(_device["source"], scope))
    return peaks


def forget_blocks():
    """Start a new tally without a device counter, as a fresh process would (for tests)."""
    _blocks.update(peak=None, resettable=True, device_peak=None)
    _device.update(read=None, reset=None, source=None)
