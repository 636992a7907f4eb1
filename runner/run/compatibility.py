"""Which build of each environment this machine can run, decided before anything is downloaded.

A GPU build's requirements file states what its wheels need, in header lines beside the pins:

    # gpu-cuda: 13.0                       the CUDA version the wheels were built with
    # gpu-driver: 580.65.06                the oldest NVIDIA driver that runs them
    # gpu-sass: 7.5 8.0 8.6 9.0 10.0 12.0  compute capabilities with machine code in the wheels
    # gpu-ptx: 12.0                        compute capabilities with PTX a newer GPU's driver can compile ("none")
    # gpu-ptx-driver: 545.23.06            the oldest driver that compiles that PTX, where newer than gpu-driver
    # gpu-system-libraries: libcudnn.so.8  libraries the wheels load from the system, not from other wheels

and an environment without a GPU build says why in its CPU requirements (`# gpu-none: <reason>`).
`plan()` checks these against the GPU that nvidia-smi reports (common/gpu.py), in the order the catalog
lists an environment's GPU builds, and picks the first that fits; where none fits, the environment is not
built and its rows say `unavailable on this GPU: <reason>`, with the figures that decided it.
"""

import dataclasses
import re
from pathlib import Path
from typing import Optional

from common import gpu as gpus
from runner.run import debian, environments

UNAVAILABLE_ON_GPU = "unavailable on this GPU: "
_HEADER = re.compile(r"^#\s*gpu-([a-z-]+):\s*(.*?)\s*$")


@dataclasses.dataclass(frozen=True)
class GpuNeeds:
    """What a GPU build's wheels need from the machine, as its requirements file states it."""

    requirements: Path
    cuda: str
    driver: str
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    system_libraries: tuple[str, ...] = ()
    ptx_driver: Optional[str] = None

    def describe(self):
        """One line: 'envs/pytorch.txt: CUDA 13.0, driver >= 580.65.06, sm 7.5-12.0, PTX 12.0'."""
        return "envs/{}: CUDA {}, driver >= {}, compute capability {}{}{}".format(
            self.requirements.name, self.cuda, self.driver, _span(self.sass),
            ", PTX {}".format(" ".join(self.ptx)) if self.ptx else ", no PTX",
            ", needs {} from the system".format(" ".join(self.system_libraries)) if self.system_libraries else "")


def _span(capabilities):
    return "{} to {}".format(capabilities[0], capabilities[-1]) if len(capabilities) > 1 else "".join(capabilities)


def header(requirements):
    """The `# gpu-KEY: value` lines of a requirements file, as {KEY: value}."""
    found = {}
    for line in Path(requirements).read_text().splitlines():
        match = _HEADER.match(line.strip())
        if match:
            found[match.group(1)] = match.group(2)
    return found


def read_needs(requirements):
    """The GpuNeeds a requirements file states; ValueError if its header lacks one of them."""
    fields = header(requirements)
    missing = [key for key in ("cuda", "driver", "sass", "ptx") if key not in fields]
    if missing:
        raise ValueError("{} lacks the header lines gpu-{}".format(Path(requirements).name, ", gpu-".join(missing)))

    def words(key):
        value = fields.get(key, "").strip()
        return () if value in ("", "none") else tuple(value.split())

    return GpuNeeds(Path(requirements), fields["cuda"], fields["driver"], words("sass"), words("ptx"),
                    words("system-libraries"), fields.get("ptx-driver"))


def version_tuple(text):
    """'580.65.06' -> (580, 65, 6); '8.6' -> (8, 6)."""
    return tuple(int(part) for part in re.findall(r"\d+", str(text)))


def machine_code_for(needs, capability):
    """True if the wheels carry machine code this compute capability runs: the same major version, a minor
    version not above it (CUDA's binary compatibility)."""
    major, minor = version_tuple(capability)[:2]
    return any(version_tuple(s)[0] == major and version_tuple(s)[1] <= minor for s in needs.sass)


def ptx_for(needs, capability):
    """True if the wheels carry PTX the driver can compile for this compute capability (PTX of one not above it)."""
    return any(version_tuple(p) <= version_tuple(capability)[:2] for p in needs.ptx)


def check(needs, gpu, find_library=None):
    """None where a GPU build can run on `gpu` (a query_nvidia_smi entry), else the reason, with its figures.

    find_library(soname) says where the system has a library (default: the loader's cache, ldconfig -p)."""
    find_library = find_library or debian.system_library
    reasons = []
    name = "this {}".format(gpu["name"])
    if gpu.get("driver") and version_tuple(gpu["driver"]) < version_tuple(needs.driver):
        reasons.append("its driver {} is older than {}, which CUDA {} needs".format(gpu["driver"], needs.driver,
                                                                                   needs.cuda))
    capability = gpu.get("compute_capability")
    if capability and not machine_code_for(needs, capability):
        if not ptx_for(needs, capability):
            reasons.append("{} is compute capability {}; the wheels carry machine code for {} and {}".format(
                name, capability, _span(needs.sass), "PTX for " + " ".join(needs.ptx) if needs.ptx else "no PTX"))
        elif needs.ptx_driver and gpu.get("driver") and version_tuple(gpu["driver"]) < version_tuple(needs.ptx_driver):
            reasons.append("{} is compute capability {}, which only the wheels' PTX serves, and its driver {} is "
                           "older than {}, which compiles that PTX".format(name, capability, gpu["driver"],
                                                                          needs.ptx_driver))
    absent = [library for library in needs.system_libraries if not find_library(library)]
    if absent:
        reasons.append("they load {} from the system, which has none (install the CUDA {} runtime and cuDNN it was "
                       "built with, or add their folder to LD_LIBRARY_PATH)".format(", ".join(absent), needs.cuda))
    if not reasons:
        return None
    return "{} ({}): {}".format(needs.requirements.name, "CUDA " + needs.cuda, "; ".join(reasons))


def no_gpu_build_reason(env):
    """Why an environment has no GPU build, from its requirements' `# gpu-none:` line."""
    return header(env.requirements).get("none") or "{} has no GPU build".format(env.name)


@dataclasses.dataclass
class Machine:
    """The GPUs nvidia-smi reported (common.gpu.query_nvidia_smi), or why it could not."""

    gpus: list
    error: Optional[str] = None
    nvidia_smi: Optional[str] = None

    @property
    def gpu(self):
        """The GPU the notebooks use (the first), or None."""
        return self.gpus[0] if self.gpus else None

    def describe(self):
        """One line for the run log and `list`."""
        if self.error:
            return "nvidia-smi failed: {}; no GPU will be used".format(self.error)
        if not self.gpus:
            return "none ({})".format("nvidia-smi lists no GPU" if self.nvidia_smi else "no nvidia-smi on PATH")
        more = " (and {} more)".format(len(self.gpus) - 1) if len(self.gpus) > 1 else ""
        return gpus.describe(self.gpu) + more


def detect():
    """Ask nvidia-smi what GPUs this machine has."""
    found = gpus.query_nvidia_smi()
    return Machine(found["gpus"], found["error"], found["nvidia_smi"])


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to do for an environment: build (or keep) `requirements`, or nothing because it cannot run here."""

    env: str
    requirements: Optional[Path]  # None with `unavailable`, or to keep whatever build is there
    gpu: bool = False  # the plan is to compute on the GPU
    unavailable: Optional[str] = None  # the table's status text when the environment cannot be used
    note: Optional[str] = None  # why an earlier-preferred GPU build was passed over


def plan(env, machine, device="auto", build=None, find_library=None):
    """Decide the build of `env`: build="cpu" or "gpu" forces one kind; None decides from the machine and `device`.

    An adopted interpreter is kept as it is unless a kind of build is forced. Without a GPU (or with
    device="cpu") any ready build is kept, else the CPU one is built. With a GPU, the first GPU build that
    fits it; none fitting: unavailable.
    """
    if environments.installation(env).chosen_by_hand and build is None:
        return Plan(env.name, None, gpu=bool(machine.gpus) and device != "cpu")
    if build == "cpu":
        return Plan(env.name, env.requirements)
    wants_gpu = build == "gpu" or (build is None and device != "cpu" and bool(machine.gpus))
    if not wants_gpu:
        return Plan(env.name, None)
    if not env.gpu_builds:
        if not machine.gpus or env.framework_module is None:  # nothing to compute on, or nothing that computes
            return Plan(env.name, None)
        return Plan(env.name, None, unavailable=UNAVAILABLE_ON_GPU + "no GPU build: " + no_gpu_build_reason(env))
    if not machine.gpus:  # --gpu on a machine without one: the preferred GPU build, nothing to check it against
        return Plan(env.name, env.gpu_requirements[0], gpu=True)
    reasons = []
    for requirements in env.gpu_requirements:
        reason = check(read_needs(requirements), machine.gpu, find_library)
        if reason is None:
            return Plan(env.name, requirements, gpu=True, note="; ".join(reasons) or None)
        reasons.append(reason)
    return Plan(env.name, None, gpu=True, unavailable=UNAVAILABLE_ON_GPU + " | ".join(reasons))


def variant_text(env):
    """What `env` is, for `list`: how it was made and, for a GPU build, the CUDA its wheels need."""
    made = environments.installation(env)
    built = made.requirements()
    if built is None or built not in env.gpu_requirements:
        return made.describe()
    return "{} (CUDA {}{})".format(made.describe(), read_needs(built).cuda,
                                   ", runs on the CPU too" if built == env.requirements else "")
