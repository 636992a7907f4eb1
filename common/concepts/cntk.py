"""CNTK's calls by concept (APIS: the code a reader of the concept must see) and the concepts its notebooks have no
cell for (LACKS, with the reason). A key is a concept of every task, or (concept, task) for one task only."""

APIS = {
    "imports": ("import cntk as C",),
    "device": ("C.device.try_set_default_device",),
    "seeding": ("C.cntk_py.set_fixed_random_seed",),
    "data-layout": ("C.input_variable",),
    ("data-layout", "rnn"): ("C.sequence.input_variable",),
    ("data-layout", "train"): ("C.input_variable", "C.Value("),
    "model": ("C.layers.",),
    ("model", "cnn"): ("C.layers.Sequential", "C.layers.Convolution2D", "C.layers.Dense"),
    ("model", "inference"): ("C.layers.Convolution2D", "C.layers.BatchNormalization"),
    ("model", "train"): ("C.layers.Convolution2D", "C.layers.BatchNormalization", "C.layers.Dense"),
    ("model", "rnn"): ("C.gather", "C.sequence.last", "C.layers.Dense"),
    ("model", "transformer"): ("C.layers.Dense", "C.layers.BlockFunction", "C.reduce_mean"),
    "weight-layout": (".value",),
    "loss": ("C.cross_entropy_with_softmax",),
    "optimizer": ("C.momentum_sgd", "unit_gain=False"),
    ("optimizer", "rnn"): ("C.adam", "use_mean_gradient=True"),
    ("optimizer", "transformer"): ("C.universal", "C.assign"),
    "training-step": ("C.Trainer", "train_minibatch"),
    "prediction": (".eval(",),
    ("sync", "cnn"): ("previous_minibatch_loss_average",),
    ("sync", "rnn"): ("previous_minibatch_loss_average",),
    ("sync", "transformer"): ("previous_minibatch_loss_average",),
    "recurrent-layer": ("C.layers.Recurrence", "C.layers.GRU"),
    "attention": ("C.times_transpose", "C.softmax", "key_bias"),
    "data-parallel": ("C.train.distributed.Communicator", "mpiexec", "barrier()"),
    "all-reduce": ("C.train.distributed.data_parallel_distributed_learner",),
}

LACKS = {
    "mixed-precision": "CNTK 2.7 has no automatic mixed precision, no loss scaling and no bfloat16 type.",
    "compilation": "CNTK builds a static graph from the start and has no further compiler or jit call.",
    ("sync", "inference"): "`eval` returns NumPy arrays, so every call has already waited for the device.",
    ("sync", "train"): "Each worker's `train_minibatch` returns when its step is done, and the workers meet at MPI "
                       "barriers.",
}
