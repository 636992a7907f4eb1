"""The CNN task: a VGG-style net trained on CIFAR-10, and everything about it that code outside its notebooks reads."""

from common.hyperparams import Rule
from common.tasks.task import TRAINING_SECTIONS, SameWeights, Task

_PROBABILITY = Rule("number", 0.0, 1.0, below_high=True)
CONVS = ((3, 50, 32), (50, 50, 32), (50, 100, 16), (100, 100, 16))  # (in, out, spatial size), 3x3 kernels


def forward_flops(params):
    """FLOPs of one CIFAR-10 image through the VGG-style CNN (convolutions and dense layers)."""
    convs = sum(2 * 9 * cin * cout * size * size for cin, cout, size in CONVS)
    dense = 2 * (100 * 8 * 8 * 512 + 512 * params["num_classes"])
    return convs + dense


class CNN(Task):
    """The VGG-style CNN: four 3x3 convolutions in two pooled stages, two dense layers."""

    def weight_shapes(self, params):
        """Convolution kernels OIHW with their biases; dense kernels (in, out), the first taking the (channels, height,
        width) feature map flattened in that order."""
        classes = params["num_classes"]
        return {
            "conv1/kernel": (50, 3, 3, 3), "conv1/bias": (50,),
            "conv2/kernel": (50, 50, 3, 3), "conv2/bias": (50,),
            "conv3/kernel": (100, 50, 3, 3), "conv3/bias": (100,),
            "conv4/kernel": (100, 100, 3, 3), "conv4/bias": (100,),
            "fc1/kernel": (100 * 8 * 8, 512), "fc1/bias": (512,),
            "fc2/kernel": (512, classes), "fc2/bias": (classes,),
        }

    def training_flops(self, params):
        """Three forward passes less the first convolution's input gradient, which nothing needs."""
        first = 2 * 9 * 3 * 50 * 32 * 32
        return 3 * forward_flops(params) - first


TASK = CNN(
    "cnn", "CNN", "CNN: VGG-style net trained on CIFAR-10", TRAINING_SECTIONS,
    headline=("train_s", "training time (s)"), metrics=("train_s", "accuracy"), digits=1,
    dataset="CIFAR-10", train_split=50000, test_split=10000, parameters=("init_weights", "export_weights"),
    hyperparameters={
        "epochs": 10,
        "batch_size": 64,
        "lr": 0.01,
        "momentum": 0.9,
        "num_classes": 10,
        "conv_dropout": 0.25,  # after each pooling
        "dense_dropout": 0.5,  # after the first dense layer
        "train_samples": None,
        "test_samples": None,
    },
    profiles={"quick": {"epochs": 3, "train_samples": 1536, "test_samples": 512},
              "smoke": {"epochs": 1, "train_samples": 256, "test_samples": 128}},
    rules={"conv_dropout": _PROBABILITY, "dense_dropout": _PROBABILITY},
    # three SGD-momentum steps on the same 64 images (one batch, three epochs), so that the velocity carries over (a
    # first SGD step is the same with momentum or without); dropout off: it draws different masks in every framework.
    # Compared: every weight after the steps, the steps themselves (weights after minus before, which the unchanged
    # bulk of each weight would otherwise hide), and the logits of the first test batch. Weights measured at most
    # 1.3e-7 from PyTorch's.
    same_weights=SameWeights({"train_samples": 64, "test_samples": 64, "epochs": 3, "conv_dropout": 0.0,
                              "dense_dropout": 0.0}, forward=False, weights_tolerance={"rtol": 1e-4, "atol": 1e-5}))
