"""The RNN task: an embedding and a GRU on IMDB, and everything about it that code outside its notebooks reads."""

from common.hyperparams import Rule
from common.tasks.task import TRAINING_SECTIONS, SameWeights, Task


def forward_flops(params):
    """FLOPs of one review through the GRU (three gates' input and recurrent products per token) and dense layer."""
    embedding, units = params["embedding_dim"], params["hidden_units"]
    per_token = 2 * 3 * (embedding * units + units * units)
    return params["maxlen"] * per_token + 2 * units * params["num_classes"]


class RNN(Task):
    """Embedding, one GRU layer whose last state goes to a dense classifier."""

    def weight_shapes(self, params):
        """The embedding (vocab, dim); the GRU's gates in the order reset, update, new, stacked along the last axis
        (common/weights.py's layout); the classifier (units, classes)."""
        vocab, dim, units = params["vocab_size"], params["embedding_dim"], params["hidden_units"]
        return {
            "embedding": (vocab, dim),
            "gru/kernel_input": (dim, 3 * units), "gru/kernel_recurrent": (units, 3 * units),
            "gru/bias_input": (3 * units,), "gru/bias_recurrent": (3 * units,),
            "fc/kernel": (units, params["num_classes"]), "fc/bias": (params["num_classes"],),
        }

    def training_flops(self, params):
        """Three forward passes (the embedding's gradient needs the input one)."""
        return 3 * forward_flops(params)


TASK = RNN(
    "rnn", "RNN", "RNN: embedding + GRU on IMDB", TRAINING_SECTIONS,
    headline=("train_s", "training time (s)"), metrics=("train_s", "accuracy"), digits=1,
    dataset="IMDB", train_split=25000, test_split=25000, parameters=("init_weights", "export_weights"), inputs="tokens",
    hyperparameters={
        "epochs": 3,
        "batch_size": 64,
        "lr": 0.001,
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": 1e-8,
        "vocab_size": 30000,
        "maxlen": 150,
        "embedding_dim": 125,
        "hidden_units": 100,
        "num_classes": 2,
        "train_samples": None,
        "test_samples": None,
    },
    # six epochs: the first (warm-up, compilation inside the step) reported apart, and five of about a second each on a
    # 2-core CPU for the median and spread (three gave two, whose spread moved 15 to 46% between runs); PyTorch's GRU
    # leaves chance within 50 Adam steps on the stand-in
    profiles={"quick": {"epochs": 6, "train_samples": 1024, "test_samples": 512},
              "smoke": {"epochs": 1, "train_samples": 256, "test_samples": 128}},
    rules={"hidden_units": Rule("integer", low=1), "embedding_dim": Rule("integer", low=1)},
    # the logits at the shared weights (a run at learning rate 0), then three Adam steps (one batch, three epochs), so
    # that beta1 and the first moment's bias correction matter (a first Adam step is the same whatever the betas).
    # beta2 0: every step is then the same whether epsilon is added before the second moment's bias correction (Keras,
    # MXNet, Chainer, CNTK) or after it (PyTorch, the TensorFlow notebook, Optax), since that correction is 1. eps 1e-5:
    # a step is then lr * m / (|g| + eps), and with a tiny eps a gradient that float32 rounding decides would divide it
    # (tests/test_check_controls.py: the NumPy RNN with its sums in another order moves weights by 3.4 with eps 1e-8, by
    # 1.5e-6 with 1e-5). Weights after the steps: lr * m / (|g| + eps) is up to 30 times the learning rate where a
    # gradient shrank since the step before, and float32 noise in such a gradient moves them by up to 2.0e-5 (measured:
    # Chainer, Keras on jax; 1e-6 elsewhere). A framework whose GRU is another function still gives back every array
    # outside the GRU's biases unchanged.
    same_weights=SameWeights({"train_samples": 64, "test_samples": 64, "epochs": 3, "beta2": 0.0, "eps": 1e-5},
                             weights_tolerance={"rtol": 1e-4, "atol": 5e-5},
                             representable=("embedding", "gru/kernel_input", "gru/kernel_recurrent", "fc/kernel",
                                            "fc/bias"),
                             forward_changes={"lr": 0.0, "epochs": 1}))
