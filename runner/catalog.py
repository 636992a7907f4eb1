"""What can run: the framework environments, the frameworks and their variants, and the notebook of each task."""

import dataclasses
import os
import re
from pathlib import Path
from typing import Optional

from common import checkout, results, tasks, variants

REPO = Path(__file__).resolve().parent.parent  # the code: this checkout, or on a Ray node the run's code Ray shipped
NOTEBOOKS = REPO / "notebooks"
# where the environments are built: this checkout, or on a Ray node the node's own (runner/run/on_ray.py, start_node)
INSTALL = Path(checkout.install_folder())
ENVS_DIR = INSTALL / ".envs"  # a dot folder: nothing in it can shadow an importable package
JUPYTER_DIR = INSTALL / ".jupyter"  # project-local Jupyter data path holding the kernel specs
REQUIREMENTS_DIR = INSTALL / "envs"
CACHE_VARIABLE = "ROSETTA_CACHE"  # the folder for what clones of the repository share on a machine (cache_dir)
RELEASE_MARK = "@"  # `-f jax@0.6.2`: a framework at one of its releases, in an environment of its own
VERSIONS_DIR = "versions"  # envs/versions/: the requirements and locks of those environments
# a release as PyPI numbers one (PEP 440's public versions: 2.9.1, 0.4.30, 2.16.0rc1, 1.0.post1)
_RELEASE = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


def cache_dir() -> Path:
    """The user's cache folder that every clone on this machine shares: $ROSETTA_CACHE, else $XDG_CACHE_HOME/rosetta,
    else ~/.cache/rosetta."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.path.abspath(os.path.expanduser(os.environ[CACHE_VARIABLE])))
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(os.path.expanduser("~")) / ".cache"  # a relative one is invalid
    return base / "rosetta"


class SelectionError(ValueError):
    """A framework, task or environment name that the catalog does not know."""


@dataclasses.dataclass(frozen=True)
class Environment:
    """A virtual environment under .envs/ (or an adopted interpreter) with its pinned requirements and Jupyter kernel."""

    name: str
    display_name: str
    python: Optional[str] = None  # "3.6" etc.; None: the interpreter that runs the setup
    # extra environment variables of the kernel; "{env}": its folder, "{cache}": cache_dir(), both when its spec is written
    kernel_env: tuple[tuple[str, str], ...] = ()
    # shared-library aliases the kernel needs, (name wanted, name provided): see envs/<name>-debian.txt
    library_aliases: tuple[tuple[str, str], ...] = ()
    # libraries compiled at setup from C sources under envs/ (name, source): stand-ins for a library the framework
    # links but does not call in any notebook, where the real one would bring in far more than it is worth
    stand_in_libraries: tuple[tuple[str, str], ...] = ()
    python_shared: bool = False  # needs an interpreter built with --enable-shared (libpythonX.Y.so), e.g. for Boost.Python
    # the builds that can use an NVIDIA GPU, in order of preference: requirements files under envs/, each
    # stating in its `# gpu-...:` lines what its wheels need (runner/run/compatibility.py reads them)
    gpu_builds: tuple[str, ...] = ()
    framework_module: Optional[str] = None  # frameworks/<module>.py, whose probe() checks the environment
    test_packages: tuple[str, ...] = ()  # pinned for the tests only: an adopted interpreter may go without them
    # optional parts added by the command that needs them, each envs/<name>-<extra>.txt (with its lock)
    extras: tuple[str, ...] = ()
    release: Optional[str] = None  # a framework's release this environment holds (its name is then <key>@<release>)
    derived_from: Optional[str] = None  # a release environment's base: the environment whose packages it takes

    @property
    def path(self) -> Path:
        return ENVS_DIR / self.name

    @property
    def base(self) -> str:
        """The environment it derives from: its own name, 'jax' for the release environment 'jax@0.6.2' and for
        'keras@3.6.0' (Keras 3 at a release runs on JAX's environment)."""
        return self.derived_from or self.name.split(RELEASE_MARK)[0]

    @property
    def requirements(self) -> Path:
        """The CPU build's requirements, envs/<name>.txt (a release's: envs/versions/<base>@<release>.txt)."""
        folder = REQUIREMENTS_DIR / VERSIONS_DIR if self.release else REQUIREMENTS_DIR
        return folder / (self.name + ".txt")

    @property
    def gpu_requirements(self) -> tuple[Path, ...]:
        """The GPU builds' requirements files, in order of preference."""
        return tuple(REQUIREMENTS_DIR / name for name in self.gpu_builds)

    @property
    def build_requirements(self) -> Optional[Path]:
        """envs/<name>-build.txt: packages installed first, for requirements built without build isolation."""
        path = REQUIREMENTS_DIR / (self.base + "-build.txt")
        return path if path.exists() else None

    def extra_requirements(self, extra) -> Path:
        """envs/<name>-<extra>.txt: the requirements of an optional part (`extras`), the environment's own included."""
        return REQUIREMENTS_DIR / "{}-{}.txt".format(self.name, extra)

    @property
    def debian_packages(self) -> Optional[Path]:
        """envs/<name>-debian.txt: Debian packages (name=version) extracted into the environment for its kernel."""
        path = REQUIREMENTS_DIR / (self.base + "-debian.txt")
        return path if path.exists() else None

    @property
    def kernel_name(self) -> str:
        """rosetta-<name>; a release's rosetta-jax-0.6.2, since Jupyter's kernel names cannot hold '@'."""
        return "rosetta-" + self.name.replace(RELEASE_MARK, "-")

    @property
    def python_path(self) -> Path:
        """The virtual environment's interpreter (runner.run.environments.interpreter also knows adopted ones)."""
        return self.path / "bin" / "python"


@dataclasses.dataclass(frozen=True)
class Variant:
    """One row of a framework in the table: the environment it runs in and parameters that select it."""

    name: Optional[str]
    env: str
    parameters: tuple[tuple[str, str], ...] = ()
    packages: tuple[str, ...] = ()  # what it needs beyond its environment's framework (checked in adopted ones)
    # {task: {array: why}}: arrays that one training step changes differently from PyTorch's although the
    # function is the same (runner/checks/equivalence.py checks that the rest agrees and that these still differ)
    step_differences: dict = dataclasses.field(default_factory=dict, hash=False, compare=False)
    # {task: why}: tasks whose notebook cannot compute PyTorch's function on this variant alone (Framework's below)
    not_equivalent: dict = dataclasses.field(default_factory=dict, hash=False, compare=False)
    # the label of the framework it computes with, whose refusals its rows take ('Keras 2 on Theano cannot ...')
    runs_on: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Framework:
    """A framework of the Rosetta stone: its command-line key, its label, and its notebooks' name prefix."""

    key: str
    label: str
    notebook_prefix: str
    variants: tuple[Variant, ...]
    # {task: why}: tasks whose notebook cannot compute PyTorch's function (runner/checks/equivalence.py checks
    # what still holds, and that the outputs do differ, so that the claim stays true)
    not_equivalent: dict = dataclasses.field(default_factory=dict, hash=False, compare=False)
    environment: Optional[Environment] = None  # the environment this framework brings, if it brings one
    # the top-level modules its notebooks import (the Rosetta pages' differences mode may count their names as one)
    modules: tuple[str, ...] = ()
    # the ResNet-50 its inference notebook builds, one of runner/checks/resnet50_v1.py's VARIANTS: the same-weights
    # check compares a zoo's v1 with that function computed in PyTorch, v1.5 with PyTorch's notebook
    resnet50: str = "v1.5"
    # {task: why}: tasks it has no notebook for (yet, or at all); the run writes their rows with the reason
    lacks: dict = dataclasses.field(default_factory=dict, hash=False, compare=False)
    # the PyPI package whose releases `-f <key>@<release>` names (its environment's requirements pin it); None: the
    # framework has no releases to choose from here (release_refusal says why)
    package: Optional[str] = None
    release: Optional[str] = None  # the release this framework's rows run (at()), None: its environment's own pin
    # where it brings no environment, the one its releases are built on: their rows are its variants on that one
    release_on: Optional[str] = None
    # variables under which its notebooks run the framework's own defaults rather than this project's settings for it
    # (JAX's CPU_XLA_FLAGS apply where XLA_FLAGS is unset): what `bisect` runs each release with, to find where a
    # release's own speed changed
    own_defaults: tuple = ()

    @property
    def own_label(self) -> str:
        """Its label without a release: 'JAX' for JAX 0.6.2's rows."""
        return self.label[:-len(self.release) - 1] if self.release else self.label

    def at(self, release: str) -> "Framework":
        """This framework at `release`: key jax@0.6.2, label 'JAX 0.6.2', its rows in the environment jax@0.6.2, the
        packages of its environment (or of release_on's: keras@3.6.0 is JAX's with Keras 3.6.0, its jax variant
        alone) with its package pinned to that release."""
        base = self.environment or ENVIRONMENTS[self.release_on]
        name = self.key + RELEASE_MARK + release
        shown = "Rosetta: {} {}".format(self.label, release)
        env = dataclasses.replace(base, name=name, display_name=shown + ("" if self.environment else " on {}".format(
            base.display_name.partition(": ")[2])), gpu_builds=(), extras=(), release=release, derived_from=base.name)
        return dataclasses.replace(
            self, key=name, label="{} {}".format(self.label, release),
            variants=tuple(dataclasses.replace(v, env=name) for v in self.variants if v.env == base.name),
            environment=env, release=release)


def task_overrides(task, run_overrides):
    """The values of `run_overrides` (--set) that name one of `task`'s hyperparameters."""
    known = tasks.get(task).hyperparameters
    return {key: value for key, value in run_overrides.items() if key in known}


@dataclasses.dataclass(frozen=True)
class Job:
    """One notebook run: a framework variant on one task, with a precision and compile mode (common/variants.py)
    and, in a sweep, one value of one hyperparameter."""

    framework: Framework
    variant: Variant
    task: str
    precision: str = "auto"
    compile_mode: str = "default"
    sweep: tuple = ()  # (hyperparameter, value) in a sweep, else ()
    round: int = 1  # with --repeat N, which of the N rounds (its outputs go to run_folder.round_folder)
    kernel_env: tuple = ()  # with --kernel-env, ((variable, value),) set in its kernel's environment, else ()

    @property
    def notebook(self) -> Path:
        return notebook_path(self.framework, self.task)

    @property
    def stem(self) -> str:
        """File name stem of this run's outputs, e.g. PyTorch_CNN, Keras_CNN-jax, PyTorch_CNN-bf16-compiled or
        PyTorch_Inference-batch_size-8."""
        stem = self.notebook.stem + (RELEASE_MARK + self.framework.release if self.framework.release else "")
        stem += ("-" + self.variant.name) if self.variant.name else ""
        stem += variants.suffix(self.precision, self.compile_mode)
        stem += "".join("-" + kernel_env_slug(name, value) for name, value in self.kernel_env)
        return stem + ("-{}-{}".format(*self.sweep) if self.sweep else "")

    @property
    def label(self) -> str:
        return results.label(self.framework.label, self.variant.name, self.precision, self.compile_mode,
                             self.swept or None, dict(self.kernel_env) or None)

    @property
    def swept(self) -> dict:
        """Its swept hyperparameter and value as overrides ({} outside a sweep)."""
        return dict([self.sweep]) if self.sweep else {}

    @property
    def progress_name(self) -> str:
        """Its name in a run's progress lines: its stem, with its round where a run has several."""
        return self.stem if self.round == 1 else "{} (round {})".format(self.stem, self.round)

    def in_round(self, number: int) -> "Job":
        """This job in round `number` of a repeated run (--repeat)."""
        return dataclasses.replace(self, round=number)

    def overrides(self, run_overrides: dict) -> dict:
        """The hyperparameters its notebook is given: the run's --set values its task has (task_overrides), then its
        swept value."""
        return dict(task_overrides(self.task, run_overrides), **self.swept)

    @property
    def refused(self) -> Optional[str]:
        """Why its framework refuses it, where that is known without running it (a compile mode that a framework
        compiling every step as written refuses: common.variants.compile_refusal); None otherwise."""
        if (self.precision, self.compile_mode) != ("auto", "on"):
            return None
        return variants.compile_refusal(self.framework.own_label, self.variant.runs_on)

    @property
    def is_default(self) -> bool:
        """True for the run the notebook does unless told otherwise: default precision and compile mode, no sweep, no
        kernel variable."""
        return (self.precision, self.compile_mode) == variants.DEFAULT and not self.sweep and not self.kernel_env

    @property
    def environment(self) -> Environment:
        return environment(self.variant.env)

    @property
    def not_equivalent(self) -> Optional[str]:
        """Why this notebook cannot compute PyTorch's function for its task (its variant's reason, else its framework's);
        None where it can."""
        return self.variant.not_equivalent.get(self.task) or self.framework.not_equivalent.get(self.task)


RUNNER = Environment("runner", "Rosetta runner", test_packages=("pytest", "pytest-xdist", "ruff", "playwright"),
                     extras=("ray",))  # ray: `run --on ray` (runner/run/on_ray.py)
# Frameworks with no data-parallel engine that runs here: they have no train notebook, and their train rows say why
NO_DATA_PARALLEL = {
    "keras2": "no data-parallel engine: Keras 2.3's multi_gpu_model runs on the TensorFlow backend only, and Keras 2 "
              "runs here on CNTK and Theano",
    "lasagne": "no data-parallel engine: Theano has none of its own (its multi-GPU training was the separate Platoon "
               "project, GPUs only)",
    "caffe": "no data-parallel engine here: Caffe 1.0 trains on several devices only as one solver per GPU joined by "
             "NCCL; this CPU build has no NCCL (caffe.has_nccl() is False) and no GPU build is packaged anywhere "
             "reachable",
}
# Theano's kernel flags: float32 as its floatX; its compiled C modules in the user's cache, which every clone on the
# machine shares (a clean clone's first run would compile for minutes), one folder per platform, processor, Python
# (Theano's default name) and Theano and NumPy versions (added): Theano keys each module by its compiler, compiler
# flags and NumPy's C ABI, and locks the folder while it compiles, so that kernels of several clones can share it
THEANO_FLAGS = ("floatX=float32,base_compiledir={cache}/theano,compiledir_format=compiledir_%(short_platform)s-"
                "%(processor)s-%(python_version)s-%(python_bitwidth)s-theano-%(theano_version)s-numpy-%(numpy_version)s")
# Keras 3's Adam (and AdamW) on TensorFlow, where an embedding's gradient comes as rows (IndexedSlices)
KERAS_SPARSE_ADAM = ("Keras' Adam on the TensorFlow backend squares the embedding's sparse gradient once per occurrence of "
                     "a token, before repeated tokens are summed")
# The frameworks, in table order: one entry each, with the environment it brings. A framework's notebooks
# are notebooks/<notebook_prefix>_<task's notebook>.ipynb and its pins envs/<environment name>.txt.
FRAMEWORKS: tuple[Framework, ...] = (
    # PyTorch's Linux wheels are CUDA builds that also run on the CPU: pytorch.txt serves both
    Framework("pytorch", "PyTorch", "PyTorch", (Variant(None, "pytorch"),), modules=("torch", "torchvision"), package="torch",
              environment=Environment("pytorch", "Rosetta: PyTorch", gpu_builds=("pytorch.txt", "pytorch-cuda12.txt"),
                                      framework_module="pytorch")),
    # TF_CPP_MIN_LOG_LEVEL=1: TensorFlow's C++ start-up INFO lines stay out of the run log; warnings remain.
    Framework("tensorflow", "TensorFlow", "TensorFlow", (Variant(None, "tensorflow"),), modules=("tensorflow", "keras"),
              package="tensorflow-cpu",
              resnet50="v1",  # keras.applications': convolution biases, batch norm's epsilon 1.001e-5
              environment=Environment("tensorflow", "Rosetta: TensorFlow", kernel_env=(("TF_CPP_MIN_LOG_LEVEL", "1"),),
                                      gpu_builds=("tensorflow-cuda12.txt",), framework_module="tensorflow")),
    Framework("keras", "Keras", "Keras", (  # Keras 3 runs in its backends' environments
        Variant("tensorflow", "tensorflow", (("backend", "tensorflow"),), packages=("keras",), step_differences={
            "rnn": {"embedding": KERAS_SPARSE_ADAM}, "transformer": {"embedding/tokens": KERAS_SPARSE_ADAM}}),
        Variant("jax", "jax", (("backend", "jax"),), packages=("keras",)),
        Variant("torch", "pytorch", (("backend", "torch"),), packages=("keras",)),
    ), resnet50="v1", modules=("keras",),  # keras.applications
        package="keras", release_on="jax",  # `-f keras@3.6.0`: Keras 3 at a release, on JAX's environment
        own_defaults=(("XLA_FLAGS", ""),)),
    Framework("jax", "JAX", "JAX", (Variant(None, "jax"),), modules=("jax", "flax", "optax"), package="jax", not_equivalent={
        "rnn": "Flax's GRUCell has no recurrent bias: the new gate's one (inside the reset product) is lost and the "
               "reset and update gates get one bias where the reference has two"},
        environment=Environment("jax", "Rosetta: JAX", gpu_builds=("jax-cuda13.txt", "jax-cuda12.txt"),
                                framework_module="jax"), own_defaults=(("XLA_FLAGS", ""),)),
    Framework("mxnet", "MXNet", "MXNet", (Variant(None, "mxnet"),), modules=("mxnet",),
              resnet50="v1",  # the Gluon model zoo's resnet50_v1: biases on each bottleneck's 1x1 convolutions
        environment=Environment("mxnet", "Rosetta: MXNet", gpu_builds=("mxnet-cuda112.txt",),
                                framework_module="mxnet")),
    Framework("chainer", "Chainer", "Chainer", (Variant(None, "chainer"),), modules=("chainer",),
              resnet50="v1_caffe_pool",  # ResNet50Layers, the Caffe model: Caffe's max pool, batch norm's epsilon 2e-5
        # CPU only: envs/chainer.txt says why
        environment=Environment("chainer", "Rosetta: Chainer", framework_module="chainer")),
    Framework("cntk", "CNTK", "CNTK", (Variant(None, "cntk"),), modules=("cntk",), not_equivalent={
        "rnn": "CNTK's GRU applies the reset gate before the recurrent product and has no recurrent biases"},
        # CNTK 2.7 was linked against OpenMPI 1.10; OpenMPI 4's libraries serve under the old names.
        environment=Environment("cntk", "Rosetta: CNTK", python="3.6",
                                library_aliases=(("libmpi.so.12", "libmpi.so.40"), ("libmpi_cxx.so.1", "libmpi_cxx.so.40")),
                                gpu_builds=("cntk-cuda10.txt",), framework_module="cntk")),
    # Keras 2.3, the last Keras with backends other than TensorFlow, runs in its backends' environments; it brings
    # Theano's: Python 3.9, float32 as Theano's floatX, its compiled C modules kept in the user's cache (THEANO_FLAGS)
    Framework("keras2", "Keras 2", "Keras2", (
        Variant("cntk", "cntk", (("backend", "cntk"),), packages=("keras",), not_equivalent={
            "transformer": "GELU is its tanh approximation on CNTK: neither CNTK 2.7 nor Keras 2's backend has an erf"},
            runs_on="CNTK"),
        Variant("theano", "theano", (("backend", "theano"),), packages=("keras",), runs_on="Theano"),
    ), resnet50="v1", lacks={"train": NO_DATA_PARALLEL["keras2"]},  # Keras Applications 1.0.8: batch norm's epsilon 1e-3
        modules=("keras",), environment=Environment("theano", "Rosetta: Theano", python="3.9", framework_module="theano",
                                kernel_env=(("THEANO_FLAGS", THEANO_FLAGS),))),
    # Lasagne 0.1, layers over Theano's symbolic graphs, in the Theano environment that Keras 2 brings
    Framework("lasagne", "Lasagne", "Lasagne", (Variant(None, "theano", packages=("lasagne",), runs_on="Theano"),),
              lacks={"train": NO_DATA_PARALLEL["lasagne"]}, modules=("lasagne", "theano"), not_equivalent={
        "rnn": "Lasagne's GRULayer has one bias per gate, on the input side: the new gate's recurrent bias (inside the "
               "reset product) has no place"}),
    # BVLC Caffe 1.0, Debian 11's CPU build with its libraries extracted from bullseye (envs/caffe-debian.txt), on a
    # Python 3.9 with libpython3.9.so for Debian's Boost.Python; OpenBLAS as its libblas.so.3; a stand-in for the
    # OpenCV library it links and no notebook calls; glog at level 2, else Caffe logs every layer it builds
    Framework("caffe", "Caffe", "Caffe", (Variant(None, "caffe"),), lacks={"train": NO_DATA_PARALLEL["caffe"],
        "transformer": "no attention in Caffe 1.0's layers: none multiplies two blobs as matrices (InnerProduct only by "
                       "its learned weights), so q k^T and the weighted sum of values have no layer (a broadcast Eltwise "
                       "product and Reduction would hold batch x length^2 x width floats, 740 MB a layer at batch 64), "
                       "and no erf for GELU"},
              modules=("caffe",),
              environment=Environment("caffe", "Rosetta: Caffe", python="3.9", python_shared=True,
                                      kernel_env=(("GLOG_minloglevel", "2"),),
                                      library_aliases=(("libblas.so.3", "libblas.so.3"),
                                                       ("libopenblas.so.0", "libopenblas.so.0")),
                                      stand_in_libraries=(("libopencv_imgcodecs.so.4.5", "caffe-imgcodecs.c"),),
                                      framework_module="caffe")),
    # Caffe2, merged into PyTorch in 2018: its Python API as the torch 1.10.2 wheel ships it (the last that works), on
    # Python 3.9; the wheel is a CUDA 10.2 build that also runs on the CPU, so caffe2.txt serves both
    Framework("caffe2", "Caffe2", "Caffe2", (Variant(None, "caffe2"),), modules=("caffe2", "torch"),
              environment=Environment("caffe2", "Rosetta: Caffe2", python="3.9", gpu_builds=("caffe2.txt",),
                                      framework_module="caffe2")),
)


@dataclasses.dataclass(frozen=True)
class AbsentFramework:
    """A framework the seeds compare that no package source reachable here provides: its rows say why."""

    key: str
    label: str
    reason: str


ABSENT: tuple[AbsentFramework, ...] = (
    AbsentFramework("nvcaffe", "NVCaffe", "absent: NVIDIA's Caffe fork has no package on PyPI or in Debian (only its "
                    "source on GitHub and NVIDIA's NGC containers, neither reachable here)"),
)
# Every environment: the runner's, then those the frameworks bring, in table order.
ENVIRONMENTS: dict[str, Environment] = {
    env.name: env for env in (RUNNER,) + tuple(f.environment for f in FRAMEWORKS if f.environment)}


def notebook_path(framework, task):
    """notebooks/<prefix>_<suffix>.ipynb: the notebook of `framework` (a Framework) for `task` (its key)."""
    return NOTEBOOKS / "{}_{}.ipynb".format(framework.notebook_prefix, tasks.TASKS[task].notebook)


def framework_keys():
    """The command-line names of all frameworks, in table order."""
    return [f.key for f in FRAMEWORKS]


def is_release(text):
    """True where `text` is a release number as PyPI numbers them ('2.9.1', '2.16.0rc1')."""
    return bool(_RELEASE.match(text))


def split_release(name):
    """('jax', '0.6.2') for 'jax@0.6.2', ('jax', None) for 'jax'; SelectionError where what follows '@' is no release."""
    key, mark, release = name.partition(RELEASE_MARK)
    if not mark:
        return name, None
    if not release:
        raise SelectionError("{}: name a release after '{}', as in {}{}1.2.3".format(name, RELEASE_MARK, key,
                                                                                    RELEASE_MARK))
    if not is_release(release):
        raise SelectionError("{}: {!r} is not a release number (PEP 440, as in 2.9.1 or 2.16.0rc1)".format(
            name, release))
    return key, release


def framework(name):
    """The framework named `name` on the command line ('jax', or 'jax@0.6.2' for JAX at that release); SelectionError
    where there is none, or where the framework has no releases to choose from."""
    key, release = split_release(name)
    found = next((f for f in FRAMEWORKS if f.key == key.lower()), None)
    if found is None:
        raise SelectionError("unknown framework {}; known frameworks: {}".format(key, ", ".join(
            framework_keys() + [a.key for a in ABSENT])))
    if release is None:
        return found
    if found.package is None:
        raise SelectionError("{}: {} has no releases to choose from here; {} do ({})".format(
            name, found.label, ", ".join(f.key for f in FRAMEWORKS if f.package), release_refusal(found)))
    return found.at(release)


def release_refusal(framework):
    """Why `-f <key>@<release>` is refused for a framework without a `package`."""
    if framework.environment is None:
        return "{} runs in {}'s environment, whose pins choose its release".format(
            framework.label, " and ".join(sorted({v.env for v in framework.variants})))
    return "its environment's own pins are the only release this project builds of it"


def environment(name):
    """The environment named `name`: one of ENVIRONMENTS, or a framework's release environment ('jax@0.6.2');
    SelectionError where there is none."""
    if name in ENVIRONMENTS:
        return ENVIRONMENTS[name]
    base, release = split_release(name)  # a release environment is named by its framework ('keras@3.6.0')
    owner = next((f for f in FRAMEWORKS if f.key == base or (f.environment and f.environment.name == base)), None)
    if release is None or owner is None:
        raise SelectionError("unknown environment {}; known environments: {}".format(name, ", ".join(ENVIRONMENTS)))
    return framework(owner.key + RELEASE_MARK + release).environment


def release_environments():
    """The release environments built under .envs/ (jax@0.6.2), in name order."""
    found = []
    for path in sorted(ENVS_DIR.glob("*" + RELEASE_MARK + "*")):  # none where .envs/ does not exist yet
        if not path.is_dir():
            continue  # its build log or lock file
        try:
            found.append(environment(path.name))
        except SelectionError:
            pass  # not a framework's release: left alone
    return found


def select(frameworks=None, task_keys=None):
    """Return the jobs for the named frameworks (a name may give a release: 'jax@0.6.2') and tasks (all when None),
    raising SelectionError on unknown names. An absent framework (ABSENT) is a known name with no jobs:
    absent_selected() names it; a task a framework lacks gives no job either: lacking() names it."""
    known_tasks = list(tasks.TASKS)
    chosen = task_keys or known_tasks
    unknown = [t for t in chosen if t not in tasks.TASKS]
    if unknown:
        raise SelectionError("unknown task {}; known tasks: {}".format(", ".join(unknown), ", ".join(known_tasks)))
    names = [k for k in frameworks or framework_keys() if k.lower() not in {a.key for a in ABSENT}]
    unknown = [key for key, _ in map(split_release, names) if key.lower() not in framework_keys()]
    if unknown:
        raise SelectionError(
            "unknown framework {}; known frameworks: {}".format(", ".join(unknown), ", ".join(
                framework_keys() + [a.key for a in ABSENT]))
        )
    chosen_frameworks = [framework(name) for name in names]
    return [Job(f, variant, task) for f in chosen_frameworks for variant in f.variants
            for task in chosen if task not in f.lacks]


def lacking(frameworks=None, task_keys=None):
    """(framework, task, why) for the named frameworks' tasks (all when None) that have no notebook: the rows the run
    writes instead of running them (select() leaves them out)."""
    absent = {a.key for a in ABSENT}
    chosen = [framework(k) for k in frameworks or framework_keys() if k.lower() not in absent]
    chosen.sort(key=lambda f: framework_keys().index(split_release(f.key)[0]))  # in table order, as the table shows
    return [(f, task, f.lacks[task]) for f in chosen for task in task_keys or list(tasks.TASKS) if task in f.lacks]


def absent_selected(frameworks=None):
    """The absent frameworks among the named ones (all of them when None), whose rows the run writes with the reason."""
    keys = [k.lower() for k in frameworks or [a.key for a in ABSENT]]
    return [a for a in ABSENT if a.key in keys]


def expand(jobs, precisions=("auto",), compile_modes=None, sweep=None, kernel_envs=()):
    """Each job once per precision, compile mode (None: its task's own, common/tasks/), (sweep = (hyperparameter,
    values)) swept value and kernel environment (none, then each (variable, value) of `kernel_envs`), grouped under its
    framework variant and task in that order; a swept hyperparameter multiplies only the tasks that have it, the
    others run once."""
    expanded = []
    for job in jobs:
        values = [()]
        if sweep and sweep[0] in tasks.get(job.task).hyperparameters:
            values = [(sweep[0], value) for value in sweep[1]]
        settings = [()] + [(tuple(setting),) for setting in kernel_envs]
        expanded += [dataclasses.replace(job, precision=precision, compile_mode=mode, sweep=value, kernel_env=setting)
                     for precision in precisions for mode in compile_modes or tasks.get(job.task).compile_modes
                     for value in values for setting in settings]
    return expanded


def kernel_env_slug(name, value):
    """A kernel environment's part of a file name: 'XLA_FLAGS-xla_cpu_use_onednn-true' for XLA_FLAGS set to
    --xla_cpu_use_onednn=true; an empty value is 'XLA_FLAGS-empty'."""
    words = re.sub(r"[^A-Za-z0-9_.]+", "-", value).strip("-")
    return "{}-{}".format(name, words or "empty")


def environments_for(jobs):
    """The environments the jobs need, each once, in catalog order (a framework's release environments after its
    own: jax, jax@0.6.2)."""
    found = {job.variant.env: job.environment for job in jobs}
    order = list(ENVIRONMENTS)
    return sorted(found.values(), key=lambda env: (order.index(env.base), env.name))
