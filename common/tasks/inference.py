"""The inference task: ResNet-50 features (2048-d), and everything about it that code outside its notebooks reads."""

from common import flops
from common.hyperparams import Rule
from common.tasks.task import SameWeights, Task


class Inference(Task):
    """ResNet-50 cut after the global average pool, timed over batches of images."""

    def weight_shapes(self, params):
        """ResNet-50 v1.5's convolutions and batch norms under torchvision's names and layouts, no classifier."""
        from common import weight_layouts

        return weight_layouts.resnet50_shapes()

    def optional_weight_shapes(self):
        """ResNet-50 v1's convolution biases, "<conv>.bias": a zoo's v1 model holds some of them."""
        from common import weight_layouts

        return {layer.conv + ".bias": (layer.out_channels,) for layer in weight_layouts.resnet50_layers()}

    def reference_weights(self, params, seed=0):
        """common/weight_layouts.py resnet50_weights: He-normal convolutions, batch norms away from identity."""
        from common import weight_layouts

        return weight_layouts.resnet50_weights(self.weight_shapes(params), seed)

    def achieved_flops(self, record):
        """A forward pass's FLOPs per image (of the ResNet-50 version the record's model names) over the median time
        per image."""
        params, metrics = record.get("params") or {}, record.get("metrics") or {}
        if not metrics.get("s_per_1000_images"):
            return None
        version = "1" if str(record.get("model") or "").startswith("ResNet-50 v1,") else "1.5"
        return flops.resnet50_forward_flops(params["image_size"], version) * 1000 / metrics["s_per_1000_images"]


TASK = Inference(
    "inference", "Inference", "Inference: ResNet-50 features (2048-d)",
    ("parameters", "imports", "setup", "data", "model", "weights", "inference", "results"),
    headline=("s_per_1000_images", "s per 1000 images"), metrics=("s_per_1000_images", "images_per_s"),
    digits=2, parameters=("init_weights", "export_weights"), optimises=False,
    hyperparameters={
        "batch_size": 32,
        "batches": 40,
        "repeats": 5,  # timed passes at the least, and at least min_timed_s seconds of them (timing.enough_passes)
        "min_timed_s": 10.0,
        "warmup_batches": 1,
        "image_size": 224,
        "features": 2048,
        "weights": "auto",
    },
    # smoke: 96, the smallest size at which ResNet-50's last stage (1/32 of it) still fits a 3x3 kernel, which CNTK
    # requires; frameworks that pad past the input's edge would accept 64
    profiles={"quick": {"batches": 1, "repeats": 5, "min_timed_s": 3.0},
              "smoke": {"batch_size": 2, "batches": 2, "repeats": 2, "min_timed_s": 0.0, "image_size": 96}},
    rules={"batches": Rule("integer", low=1), "warmup_batches": Rule("integer", low=0),
           "features": Rule("choice", choices=(2048,), why="ResNet-50's global average pool"),
           "weights": Rule("choice", choices=("auto", "imagenet", "random"))},
    # each framework's compiled inference beside its default: where a framework's guide recommends a compiler for
    # inference (torch.compile with freezing, XLA, a static hybridize), only that row shows what it reaches
    compile_modes=("default", "on"),
    # the smoke profile's two 96x96 images per batch; features, not time; no download of ImageNet weights, which the
    # shared ones replace. Compared: the features of the first batch at the shared (v1.5) weights, relative to the
    # largest, and the weights coming back unchanged; a zoo's v1 model (the registry's `resnet50`) against v1 computed
    # in PyTorch (runner/checks/resnet50_v1.py). A framework that cannot compute it is not run.
    same_weights=SameWeights({"repeats": 1, "min_timed_s": 0.0, "weights": "random"}, outputs="resnet50 features", steps=False,
                             checks_not_equivalent=False))
