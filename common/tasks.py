"""The workloads of the Rosetta stone and every fact about them that code outside their notebooks reads.

One entry per task; hyperparameters live in common/hyperparams.py, canonical weight layouts in
common/weights.py and FLOP counts in common/flops.py, each keyed by the task names declared here.
The runner (runner/catalog.py) declares the frameworks; together they are the project's registry.
Standard library only: notebooks import this on Python 3.6.
"""

from collections import OrderedDict

# Every section a notebook can have, by cell tag, with the title the Rosetta pages give it. The cell
# before the first tagged one (the notebook's title and introduction) is the "title" section.
SECTION_TITLES = OrderedDict([
    ("title", "Introduction"),
    ("parameters", "Parameters"),
    ("imports", "Imports"),
    ("setup", "Setup"),
    ("data", "Data"),
    ("model", "Model"),
    ("weights", "Shared weights"),
    ("training", "Training step and loop"),
    ("evaluation", "Evaluation"),
    ("inference", "Timed inference"),
    ("results", "Result record"),
])
# Parameters every notebook of every task has, in this order, in its first code cell.
PARAMETERS = ("profile", "overrides", "data_source", "device", "precision", "compile_mode", "threads", "seed",
              "result_path")


class Task(object):
    """One workload: its names, its notebooks' sections, its headline figure and its equivalence case."""

    def __init__(self, key, notebook, title, sections, headline, metrics, digits, dataset=None, train_split=None,
                 test_split=None, parameters=(), equivalence=None, inputs="images", compile_modes=("default",)):
        unknown = [tag for tag in sections if tag not in SECTION_TITLES]
        if unknown:
            raise ValueError("task {}: sections without a title in SECTION_TITLES: {}".format(key, ", ".join(unknown)))
        self.key = key  # the command-line name, e.g. "cnn"
        self.notebook = notebook  # the notebooks' name suffix: <Framework>_<notebook>.ipynb
        self.title = title
        self.sections = tuple(sections)  # cell tags, in notebook order; every notebook of the task has all of them
        self.headline = headline  # (metric, label): the figure the task is ranked by, lower is better
        self.metrics = tuple(metrics)  # the metrics an "ok" record must have
        self.digits = digits  # decimals of the headline figure in tables
        self.dataset = dataset  # the name of its download in common/datasets.py (REMOTE_FILES); None: generated
        self.train_split = train_split  # samples in the whole training split (None: nothing is trained)
        self.test_split = test_split  # samples in the whole test split
        self.parameters = tuple(parameters)  # notebook parameters after PARAMETERS, the same in every framework
        self.inputs = inputs  # "images" or "tokens": what a batch holds (an image layout matters for images only)
        # the compile modes (common/variants.py) a run gives the task's notebooks where --compile, --precision and
        # --sweep are not given: each is a row of its table
        self.compile_modes = tuple(compile_modes)
        # overrides of the smoke profile for the same-weights check (runner/checks/equivalence.py); None: not checked
        self.equivalence = equivalence

    @property
    def trains(self):
        """True for a task that trains a model (and so reports accuracy)."""
        return self.train_split is not None

    def __repr__(self):
        return "Task({!r})".format(self.key)


TASKS = OrderedDict((task.key, task) for task in (
    Task("cnn", "CNN", "CNN: VGG-style net trained on CIFAR-10",
         ("parameters", "imports", "setup", "data", "model", "weights", "training", "evaluation", "results"),
         headline=("train_s", "training time (s)"), metrics=("train_s", "accuracy"), digits=1,
         dataset="CIFAR-10", train_split=50000, test_split=10000, parameters=("init_weights", "export_weights"),
         # dropout off: it draws different masks in every framework; three steps (one batch, three epochs), so that
         # momentum plays its part (a first SGD step is the same with it or without)
         equivalence={"train_samples": 64, "test_samples": 64, "epochs": 3, "conv_dropout": 0.0,
                      "dense_dropout": 0.0}),
    Task("inference", "Inference", "Inference: ResNet-50 features (2048-d)",
         ("parameters", "imports", "setup", "data", "model", "weights", "inference", "results"),
         headline=("s_per_1000_images", "s per 1000 images"), metrics=("s_per_1000_images", "images_per_s"),
         digits=2, parameters=("init_weights", "export_weights"),
         # each framework's compiled inference beside its default: where a framework's guide recommends a compiler for
         # inference (torch.compile with freezing, XLA, a static hybridize), only that row shows what it reaches
         compile_modes=("default", "on"),
         # the smoke profile's two 96x96 images per batch; features, not time; no download of ImageNet weights, which
         # the shared ones replace
         equivalence={"repeats": 1, "weights": "random"}),
    Task("rnn", "RNN", "RNN: embedding + GRU on IMDB",
         ("parameters", "imports", "setup", "data", "model", "weights", "training", "evaluation", "results"),
         headline=("train_s", "training time (s)"), metrics=("train_s", "accuracy"), digits=1,
         dataset="IMDB", train_split=25000, test_split=25000, parameters=("init_weights", "export_weights"), inputs="tokens",
         # three Adam steps (one batch, three epochs), so that beta1 and the first moment's bias correction matter (a
         # first Adam step is the same whatever the betas). beta2 0: every step is then the same whether epsilon is
         # added before the second moment's bias correction (Keras, MXNet, Chainer, CNTK) or after it (PyTorch, the
         # TensorFlow notebook, Optax), since that correction is 1. eps 1e-5: a step is then lr * m / (|g| + eps), and
         # with a tiny eps a gradient that float32 rounding decides would divide it (tests/test_check_controls.py:
         # the NumPy RNN with its sums in another order moves weights by 3.4 with eps 1e-8, by 1.5e-6 with 1e-5)
         equivalence={"train_samples": 64, "test_samples": 64, "epochs": 3, "beta2": 0.0, "eps": 1e-5}),
    Task("transformer", "Transformer", "Transformer: encoder on IMDB",
         ("parameters", "imports", "setup", "data", "model", "weights", "training", "evaluation", "results"),
         headline=("train_s", "training time (s)"), metrics=("train_s", "accuracy"), digits=1,
         dataset="IMDB", train_split=25000, test_split=25000, parameters=("init_weights", "export_weights"), inputs="tokens",
         # as the RNN's: the logits at the shared weights, then three AdamW steps with beta2 0 (a step is lr * m / (|g| +
         # eps) plus the decay), dropout off (every framework draws its own masks); but eps 1e-3: with 1e-5 an element
         # whose gradient falls from 1e-3 to float32 noise (4.7e-7 in MXNet, 6.4e-8 in PyTorch) steps by up to 100 times
         # that noise, so that correct rows ended 1e-3 apart after three steps, and so did the NumPy model with its
         # batch reversed (1.7e-4); with 1e-3 it ends within 1.2e-7 (tests/test_check_controls.py)
         equivalence={"train_samples": 64, "test_samples": 64, "epochs": 3, "beta2": 0.0, "eps": 1e-3, "dropout": 0.0}),
    # Data-parallel training throughput: not checked against PyTorch (equivalence None); each framework's
    # data-parallel step is checked against its own single-device step instead (tests/test_data_parallel.py)
    Task("train", "Train", "Train: ResNet-50, data-parallel training throughput",
         ("parameters", "imports", "setup", "data", "model", "weights", "training", "results"),
         headline=("s_per_1000_images", "s per 1000 training images"), metrics=("s_per_1000_images", "images_per_s"),
         digits=2, parameters=("init_weights", "export_weights", "machine_rank", "coordinator")),
))


def get(key):
    """The task named `key`; ValueError naming the known tasks if there is none."""
    if key not in TASKS:
        raise ValueError("unknown task {!r}; known tasks: {}".format(key, ", ".join(TASKS)))
    return TASKS[key]


def section_title(tag):
    """The title of a section tag; ValueError for a tag SECTION_TITLES does not name."""
    if tag not in SECTION_TITLES:
        raise ValueError("section tag {!r} has no title; add it to common/tasks.py SECTION_TITLES".format(tag))
    return SECTION_TITLES[tag]
