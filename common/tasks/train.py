"""The train task: ResNet-50 trained data-parallel, and everything about it that code outside its notebooks reads."""

from common import flops
from common.hyperparams import Rule
from common.tasks.task import Task

_COUNT = Rule("integer", low=1)


def training_flops(params):
    """FLOPs of one image's training step through ResNet-50 v1.5 and its classifier: three forward passes less the
    first convolution's input gradient."""
    size = params["image_size"]
    forward = flops.resnet50_forward_flops(size, "1.5") + 2 * 2048 * params["num_classes"]
    first = 2 * 7 * 7 * 3 * 64 * (-(-size // 2)) ** 2
    return 3 * forward - first


class Train(Task):
    """ResNet-50 v1.5 with its classifier, trained on synthetic images by each framework's data-parallel engine."""

    def check_values(self, params):
        """The micro-batches must divide the batch."""
        if params["batch_size"] % params["micro_batches"]:
            raise ValueError("hyperparameter micro_batches={!r} for task {}: must divide batch_size={}".format(
                params["micro_batches"], self.key, params["batch_size"]))

    def weight_shapes(self, params):
        """ResNet-50's (common/weights.py) with its classifier, under torchvision's names and layout (out, in)."""
        from common import weight_layouts

        classes = params["num_classes"]
        return dict(weight_layouts.resnet50_shapes(), **{"fc.weight": (classes, 2048), "fc.bias": (classes,)})

    def reference_weights(self, params, seed=0):
        """common/weight_layouts.py resnet50_weights, the classifier uniform(+-1/sqrt(2048))."""
        from common import weight_layouts

        return weight_layouts.resnet50_weights(self.weight_shapes(params), seed)

    def training_flops(self, params):
        """FLOPs of one image's training step (training_flops)."""
        return training_flops(params)

    def achieved_flops(self, record):
        """A training step's FLOPs per image over the median time per image."""
        params, metrics = record.get("params") or {}, record.get("metrics") or {}
        if not metrics.get("s_per_1000_images"):
            return None
        return training_flops(params) * 1000 / metrics["s_per_1000_images"]


TASK = Train(
    "train", "Train", "Train: ResNet-50, data-parallel training throughput",
    ("parameters", "imports", "setup", "data", "model", "weights", "training", "results"),
    headline=("s_per_1000_images", "s per 1000 training images"), metrics=("s_per_1000_images", "images_per_s"),
    digits=2, parameters=("init_weights", "export_weights", "machine_rank", "coordinator"), data_parallel=True,
    hyperparameters={
        "devices": 1,  # data-parallel workers per machine: GPUs, or on the CPU processes (or devices) sharing its cores
        "machines": 1,  # machines taking part, each with `devices` workers (the notebook runs on each: README)
        "batch_size": 64,  # per device: N devices step on N x batch_size images
        "micro_batches": 1,  # each device's batch in this many parts, gradients summed (see common/scaling.py)
        "image_size": 224,
        "num_classes": 1000,
        "lr": 0.1,
        "momentum": 0.9,
        "warmup_steps": 5,  # untimed, reported apart (compilation, autotuning, the engine's first buckets)
        "steps": 20,  # timed steps a pass
        "repeats": 5,  # timed passes at the least, reported as median and spread
        "min_timed_s": 10.0,  # and at least this many seconds of them: the count set after the first (timing.time_passes)
    },
    profiles={"quick": {"batch_size": 8, "warmup_steps": 1, "steps": 2, "repeats": 3, "min_timed_s": 5.0},
              "smoke": {"batch_size": 2, "image_size": 96, "num_classes": 10, "warmup_steps": 1, "steps": 1,
                        "repeats": 2, "min_timed_s": 0.0}},
    rules={"devices": _COUNT, "machines": _COUNT, "micro_batches": _COUNT, "warmup_steps": Rule("integer", low=0),
           "steps": _COUNT},
    # not checked against PyTorch's: each framework's data-parallel step is checked against its own single-device step
    # instead (runner/checks/data_parallel.py)
    same_weights=None)
