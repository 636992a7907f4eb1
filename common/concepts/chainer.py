"""Chainer's calls by concept (APIS: the code a reader of the concept must see) and the concepts its notebooks have
no cell for (LACKS, with the reason). A key is a concept of every task, or (concept, task) for one task only."""

APIS = {
    "device": ("chainer.get_device",),
    "seeding": ("np.random.seed",),
    ("model", "inference"): ("L.ResNet50Layers",),
    "model": ("chainer.Chain", "init_scope()"),
    ("initialisation", "inference"): ("pretrained_model=",),
    ("initialisation", "train"): ("chainer.initializers.",),
    "weight-layout": (".send(",),
    "loss": ("F.softmax_cross_entropy",),
    "optimizer": ("chainer.optimizers.", "optimizer.setup("),
    "training-step": ("cleargrads()", ".backward(", "optimizer.update()"),
    ("mixed-precision", "inference"): ("chainer.mixed16",),
    "mixed-precision": ("chainer.mixed16", "use_fp32_update()", "optimizer.loss_scaling()"),
    "prediction": ("chainer.using_config(\"train\", False)", "chainer.no_backprop_mode()"),
    ("sync", "cnn"): ("Stream.null.synchronize",),
    ("sync", "inference"): ("Stream.null.synchronize",),
    ("sync", "rnn"): ("Stream.null.synchronize",),
    ("sync", "transformer"): ("Stream.null.synchronize",),
    "timed-inference": ("chainer.no_backprop_mode()",),
    "recurrent-layer": ("L.NStepGRU",),
    "attention": ("F.matmul", "F.where", "F.softmax"),
    "data-parallel": ("chainermn.create_communicator", "bcast_data", "mpiexec"),
    "all-reduce": ("chainermn.create_multi_node_optimizer",),
}

LACKS = {
    "float32-policy": "Chainer here computes on NumPy, whose float32 products are always full float32: there is no "
                      "TF32 switch to set (CuPy's CUPY_TF32 would be one, and this environment has no CuPy).",
    "compilation": "Chainer is define-by-run only: it has no compiler, graph mode or tracing JIT, so every step runs "
                   "eagerly as Python.",
    ("sync", "train"): "The workers compute with NumPy, which is synchronous: a step has finished when it returns, and "
                       "the passes start together at an MPI barrier.",
}
