"""The transformer task: a pre-norm encoder on IMDB, and everything about it that code outside its notebooks reads."""

from common.hyperparams import Rule
from common.tasks.task import TRAINING_SECTIONS, SameWeights, Task

_COUNT = Rule("integer", low=1)


def forward_flops(params):
    """FLOPs of one review through the encoder: per layer the four projections (query, key, value, output), the
    attention scores and their weighted sum of values over every pair of positions (padding included: it is masked,
    not skipped), the feed-forward block's two products; then the classifier. Norms, softmax and GELU not counted."""
    length, width, units = params["maxlen"], params["model_dim"], params["feedforward_units"]
    per_layer = 4 * 2 * length * width * width + 2 * 2 * length * length * width + 2 * 2 * length * width * units
    return params["layers"] * per_layer + 2 * width * params["num_classes"]


class Transformer(Task):
    """A pre-norm encoder: token and position embeddings summed, `layers` blocks of attention and feed-forward, each
    after a layer norm and summed into the residual, a final layer norm, the mean over the tokens that are not
    padding, and the classifier."""

    def check_values(self, params):
        """The heads must divide the width."""
        if params["model_dim"] % params["heads"]:
            raise ValueError("hyperparameter heads={!r} for task {}: must divide model_dim={}".format(
                params["heads"], self.key, params["model_dim"]))

    def weight_shapes(self, params):
        """common/weights.py's transformer layout: embeddings, per layer its two norms, four projections and the
        feed-forward block's two dense layers, the final norm and the classifier."""
        width, units, classes = params["model_dim"], params["feedforward_units"], params["num_classes"]
        out = {"embedding/tokens": (params["vocab_size"], width), "embedding/positions": (params["maxlen"], width),
               "final_norm/scale": (width,), "final_norm/bias": (width,), "fc/kernel": (width, classes),
               "fc/bias": (classes,)}
        for layer in range(params["layers"]):
            prefix = "layer{}/".format(layer)
            for norm in ("attention_norm", "feedforward_norm"):
                out.update({prefix + norm + "/scale": (width,), prefix + norm + "/bias": (width,)})
            for projection in ("query", "key", "value", "output"):
                out.update({prefix + "attention/" + projection + "/kernel": (width, width),
                            prefix + "attention/" + projection + "/bias": (width,)})
            out.update({prefix + "feedforward/hidden/kernel": (width, units), prefix + "feedforward/hidden/bias": (units,),
                        prefix + "feedforward/output/kernel": (units, width), prefix + "feedforward/output/bias": (width,)})
        return out

    def training_flops(self, params):
        """Three forward passes (the embeddings' gradient needs the input one)."""
        return 3 * forward_flops(params)


TASK = Transformer(
    "transformer", "Transformer", "Transformer: encoder on IMDB", TRAINING_SECTIONS,
    headline=("train_s", "training time (s)"), metrics=("train_s", "accuracy"), digits=1,
    dataset="IMDB", train_split=25000, test_split=25000, parameters=("init_weights", "export_weights"), inputs="tokens",
    # A pre-norm encoder (layer norm before attention and before the feed-forward block, and once after the last
    # layer): it trains from the first step without a learning-rate warm-up, which the post-norm original needs
    hyperparameters={
        "epochs": 3,
        "batch_size": 64,
        "lr": 5e-4,
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": 1e-8,
        "weight_decay": 0.01,  # AdamW's decoupled decay, of every weight (biases, norms and embeddings too)
        "vocab_size": 30000,
        "maxlen": 150,  # tokens per review, and so the positions the position embedding has
        "model_dim": 128,
        "heads": 4,
        "layers": 4,
        "feedforward_units": 512,  # with exact (erf) GELU between its two dense layers
        "dropout": 0.1,  # on the embeddings' sum and on each block's output before its residual sum
        "norm_epsilon": 1e-5,
        "num_classes": 2,
        "train_samples": None,
        "test_samples": None,
    },
    # quick: half the RNN's reviews, for the main command's time: a transformer step costs 14 times a GRU's. PyTorch's
    # leaves chance within 24 steps (0.88 on 512 reviews, 0.48 on 256); three rows need more (docs/results.md)
    profiles={"quick": {"epochs": 3, "train_samples": 512, "test_samples": 256},
              "smoke": {"epochs": 1, "train_samples": 256, "test_samples": 128}},
    rules={"model_dim": _COUNT, "heads": _COUNT, "layers": _COUNT, "feedforward_units": _COUNT,
           "dropout": Rule("number", 0.0, 1.0, below_high=True), "weight_decay": Rule("number", 0.0),
           "norm_epsilon": Rule("number", 0.0, why="added to a variance")},
    # as the RNN's: the logits at the shared weights, then three AdamW steps with beta2 0 (a step is lr * m / (|g| +
    # eps) plus the decay), dropout off (every framework draws its own masks); but eps 1e-3: with 1e-5 an element
    # whose gradient falls from 1e-3 to float32 noise (4.7e-7 in MXNet, 6.4e-8 in PyTorch) steps by up to 100 times
    # that noise, so that correct rows ended 1e-3 apart after three steps, and so did the NumPy model with its
    # batch reversed (1.7e-4); with 1e-3 it ends within 1.2e-7 (tests/test_check_controls.py). A framework with a GELU
    # or an attention of its own still gives back every array unchanged.
    same_weights=SameWeights({"train_samples": 64, "test_samples": 64, "epochs": 3, "beta2": 0.0, "eps": 1e-3,
                              "dropout": 0.0}, weights_tolerance={"rtol": 1e-4, "atol": 5e-5},
                             forward_changes={"lr": 0.0, "epochs": 1}))
