"""How FLOPs are counted, ResNet-50's count (two tasks compute it), and peak throughputs to compare achieved FLOP/s
with. Each task's own count is in its module (common/tasks/<key>.py: Task.training_flops, Task.achieved_flops).

A multiply-add counts as 2 FLOPs. Counted: convolutions, dense layers and the GRU's matrix products;
left out: activations, pooling, batch normalisation, softmax, the GRU's gate arithmetic and embedding
lookups (together a few percent at most). A training step counts 3 forward passes (forward, gradients
of the activations, gradients of the weights), less the activation gradient of the first layer, which
nothing needs.
"""

import re

from common import gpu

# Dense (no sparsity) peak TFLOP/s per GPU as the vendor specifies them: fp32 on CUDA cores, tf32 and
# fp16/bf16 on tensor cores (None where the GPU has no such unit); where a datasheet gives only the
# sparse tensor figure, half of it. Matched as whole words against the device name (common.gpu.name_matches),
# first match wins, so the more specific names come first. A GPU not listed gets an estimate
# (gpu_peak_estimate) from what its driver reports.
GPU_PEAK_TFLOPS = (
    ("B200", {"fp32": 75.0, "tf32": 1100.0, "fp16": 2250.0}),  # HGX B200, per GPU
    ("H200", {"fp32": 67.0, "tf32": 494.7, "fp16": 989.4}),
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "fp16": 756.0}),
    ("H100", {"fp32": 67.0, "tf32": 494.7, "fp16": 989.4}),  # SXM
    ("A100", {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0}),
    ("L40S", {"fp32": 91.6, "tf32": 183.0, "fp16": 366.0}),
    ("RTX 6000 Ada", {"fp32": 91.1, "tf32": 182.1, "fp16": 364.2}),
    ("L4", {"fp32": 30.3, "tf32": 60.0, "fp16": 121.0}),
    ("A10", {"fp32": 31.2, "tf32": 62.5, "fp16": 125.0}),  # not the A10G, which NVIDIA does not list: estimated
    ("V100-PCIE", {"fp32": 14.0, "tf32": None, "fp16": 112.0}),
    ("V100", {"fp32": 15.7, "tf32": None, "fp16": 125.0}),  # SXM2
    ("T4", {"fp32": 8.1, "tf32": None, "fp16": 65.0}),
    ("P100-SXM2", {"fp32": 10.6, "tf32": None, "fp16": 21.2}),
    ("P100", {"fp32": 9.3, "tf32": None, "fp16": 18.7}),  # PCIe
    ("K80", {"fp32": 4.37, "tf32": None, "fp16": None}),  # one of the board's two GK210 devices, boost clock
)
# fp32 units (CUDA cores) per multiprocessor by compute capability, major.minor or major alone, for the
# estimate: a fused multiply-add per unit and clock.
FP32_UNITS_PER_SM = {"3": 192, "5": 128, "6.0": 64, "6": 128, "7": 64, "8.0": 64, "8": 128, "9": 128, "10": 128,
                     "11": 128, "12": 128}
# fp32 FLOPs per cycle and core: two fused multiply-add units of 512, 256 or 128 bits. AMD's Zen 4
# (family 25) runs AVX-512 on 256-bit units ("avx512-on-256"). cpu_simd names the families it knows; the tables
# divide by the measured ceiling (runner/run/ceiling.py), this estimate is only shown beside it.
CPU_FLOPS_PER_CYCLE = {"avx512": 64, "avx512-on-256": 32, "avx2": 32, "sse": 16}

def resnet50_forward_flops(image_size=224, version="1.5"):
    """FLOPs of one image through ResNet-50 up to the global average pool.

    version "1.5" (torchvision) strides a downsampling block's 3x3 convolution; "1" (the original, Keras,
    Gluon's resnet50_v1, Caffe) strides its first 1x1, so that the 3x3 runs at the lower resolution: 5% fewer.
    """
    if version not in ("1", "1.5"):
        raise ValueError("ResNet-50 version {!r}: known versions are '1' and '1.5'".format(version))
    def out(size, stride):
        return -(-size // stride)  # 'same' padding: ceil(size / stride)

    size = out(image_size, 2)
    total = 2 * 7 * 7 * 3 * 64 * size * size
    size = out(size, 2)  # max pool
    channels = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for block in range(blocks):
            step = stride if block == 0 else 1
            reduced = out(size, step)
            reduce_size = reduced if version == "1" else size
            total += 2 * channels * width * reduce_size * reduce_size  # 1x1 reduce (strided in v1)
            total += 2 * 9 * width * width * reduced * reduced  # 3x3 (strided in v1.5)
            total += 2 * width * 4 * width * reduced * reduced  # 1x1 expand
            if block == 0:
                total += 2 * channels * 4 * width * reduced * reduced  # projection shortcut
            channels, size = 4 * width, reduced
    return total


def gpu_peak_tflops(name):
    """The peak table's entry for a GPU name (e.g. 'NVIDIA H100 80GB HBM3'), or None if it is not listed."""
    for key, peaks in GPU_PEAK_TFLOPS:
        if gpu.name_matches(key, name):
            return dict(peaks, gpu=key)
    return None


def gpu_peak_estimate(compute_capability, multiprocessors, clock_mhz):
    """An estimate of a GPU's fp32 peak in TFLOP/s: multiprocessors x fp32 units each x 2 x clock; None if unknown."""
    if not (compute_capability and multiprocessors and clock_mhz):
        return None
    major = str(compute_capability).split(".")[0]
    units = FP32_UNITS_PER_SM.get(str(compute_capability), FP32_UNITS_PER_SM.get(major))
    return None if units is None else multiprocessors * units * 2 * clock_mhz / 1e6


def _cpuinfo():
    """/proc/cpuinfo's text, or '' off Linux."""
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


def cpu_identity(text=None):
    """(vendor, family, model) of the CPU from /proc/cpuinfo's text (`text`, else this machine's): e.g.
    ('AuthenticAMD', 26, 2); None for what it does not say."""
    text = _cpuinfo() if text is None else text

    def field(name):
        found = re.search(r"^{}\s*:\s*(\S+)".format(name), text, re.M)
        return found.group(1) if found else None

    family, model = field("cpu family"), field("model")
    return (field("vendor_id"), int(family) if family and family.isdigit() else None,
            int(model) if model and model.isdigit() else None)


def cpu_family(text=None):
    """The CPU's vendor, family and model in one string, e.g. 'AuthenticAMD family 26 model 2'; None off Linux."""
    vendor, family, model = cpu_identity(text)
    return None if vendor is None else "{} family {} model {}".format(vendor, family, model)


def cpu_simd(text=None):
    """The fp32 vector units of this CPU (or of /proc/cpuinfo's `text`) as a CPU_FLOPS_PER_CYCLE key, for the families
    the rule names: Intel's family 6 (two FMA units of its widest vector), AMD's Zen 2 (family 23 from model 0x30) and
    Zen 3 and 4 (family 25, AVX-512 on 256-bit units). None for any other CPU (its units are unknown, never guessed)
    or off Linux."""
    text = _cpuinfo() if text is None else text
    vendor, family, model = cpu_identity(text)
    flags = set(re.search(r"^flags\s*:(.*)$", text, re.M).group(1).split()) if "flags" in text else set()
    wide = "avx512f" in flags
    fma = "avx2" in flags and "fma" in flags
    if vendor == "GenuineIntel" and family == 6:
        return "avx512" if wide else "avx2" if fma else "sse"
    if vendor == "AuthenticAMD" and (family == 25 or (family == 23 and (model or 0) >= 0x30)):
        return "avx512-on-256" if wide else "avx2" if fma else "sse"
    return None


def cpu_mhz():
    """The CPU's highest clock in MHz (cpufreq's maximum, else /proc/cpuinfo's figure), or None if unknown."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as f:
            return int(f.read().strip()) / 1000.0
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            found = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", f.read(), re.M)
        return float(found.group(1)) if found else None
    except OSError:
        return None


def cpu_peak_gflops(cores, mhz, simd):
    """An estimate of a CPU's fp32 peak: cores x clock x FLOPs per cycle of its vector unit; None if unknown."""
    if not (cores and mhz and simd in CPU_FLOPS_PER_CYCLE):
        return None
    return cores * mhz / 1000.0 * CPU_FLOPS_PER_CYCLE[simd]

