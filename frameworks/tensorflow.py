"""TensorFlow: the device, the precision policy and the record's facts, for every TensorFlow notebook (and Keras on it)."""

import tensorflow as tf

from common import environment, gpu, results, variants
from frameworks.probe import check_gpu

NAME = "TensorFlow"
# what choose_device and set_variant decided, for the record: the precision asked for and the one computed in
chosen = {"note": None, "requested": "auto", "precision": "fp32", "compile": "default"}


def _gpu_devices():
    return tf.config.list_physical_devices("GPU")


def gpu_names():
    """The GPUs TensorFlow sees."""
    return [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in _gpu_devices()]


def why_no_gpu():
    """Why TensorFlow sees no GPU, as far as it tells: a CPU build, or the CUDA it was built for."""
    build = tf.sysconfig.get_build_info()
    if not build.get("is_cuda_build"):
        return "TensorFlow {} is a CPU build".format(tf.__version__)
    return "TensorFlow {} (built for CUDA {}, cuDNN {}) sees no GPU; its start-up log says why".format(
        tf.__version__, build.get("cuda_version"), build.get("cudnn_version"))


def choose_device(device):
    """"/GPU:0" or "/CPU:0" for the notebook's `device` parameter; device="cuda" without a usable GPU raises DeviceError."""
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    return "/GPU:0" if kind == "gpu" else "/CPU:0"


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py): the float32 policy, TF32 for matrix products and convolutions where
    the GPU has it and precision allows; returns the precision computed in ("fp32", "tf32", "bf16" or "fp16")."""
    tf32 = False
    if gpu.device_kind(dev) == "gpu":
        capability = tf.config.experimental.get_device_details(_gpu_devices()[0]).get("compute_capability")
        tf32 = environment.tf32_allowed("{}.{}".format(*capability) if capability else None)
    float32 = variants.float32_mode(NAME, precision, tf32, "this GPU" if gpu.device_kind(dev) == "gpu" else "the CPU")
    tf.config.experimental.enable_tensor_float_32_execution(float32 == "tf32")
    return _chose(precision, float32, compile_mode)


def _chose(precision, float32, compile_mode):
    """Note the variant for the record; bf16 and fp16 are applied by the notebook, the framework's own way."""
    variants.check(precision, compile_mode)
    if precision in variants.MIXED:  # until the notebooks apply it: never run float32 under a mixed label
        variants.refuse(NAME, "precision", precision, "not written in these notebooks yet")
    chosen.update(requested=precision, precision=precision if precision in variants.MIXED else float32,
                  compile=compile_mode)
    return chosen["precision"]

def gpu_facts(on_gpu):
    """(GPU names, CUDA version, cuDNN version) as TensorFlow's build reports them; empty on a CPU run."""
    if not on_gpu:
        return [], None, None
    build = tf.sysconfig.get_build_info()
    return gpu_names(), build.get("cuda_version"), build.get("cudnn_version")


def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts as TensorFlow reports them."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["requested"],
                                compile_mode=chosen["compile"])
    record["device"] = dev
    gpus, cuda, cudnn = gpu_facts(gpu.device_kind(dev) == "gpu")
    record["environment"] = environment.facts(NAME, tf.__version__, dev, gpus=gpus, cuda=cuda, cudnn=cudnn,
                                              threads=environment.usable_cores(), precision=chosen["precision"],
                                              gpu_unused=chosen["note"])
    return record


def probe():
    """For the runner after a build: TensorFlow's version, its GPUs, and a matrix product on the first one."""
    def matrix_product():
        with tf.device("/GPU:0"):
            x = tf.ones((64, 64))
            return tf.reduce_sum(tf.matmul(x, x))

    return check_gpu(NAME, tf.__version__, gpu_names(), why_no_gpu, matrix_product,
                     cuda=tf.sysconfig.get_build_info().get("cuda_version"))
