"""Lasagne's calls by concept (APIS: the code a reader of the concept must see) and the concepts its notebooks have no
cell for (LACKS, with the reason). A key is a concept of every task, or (concept, task) for one task only."""

APIS = {
    "imports": ("import lasagne", "import theano"),
    "seeding": ("lasagne.random.set_rng",),
    "float32-policy": ("theano.config.floatX",),
    "data-layout": ("T.imatrix",),
    ("data-layout", "cnn"): ("T.tensor4", "T.ivector"),
    ("data-layout", "inference"): ("T.tensor4",),
    "model": ("L.InputLayer", "L.DenseLayer"),
    ("model", "cnn"): ("L.InputLayer", "L.Conv2DLayer", "L.DenseLayer"),
    ("model", "inference"): ("L.Layer", "add_param", "lasagne.init.", "L.Conv2DLayer"),
    ("model", "rnn"): ("L.InputLayer", "L.EmbeddingLayer", "L.DenseLayer"),
    ("model", "transformer"): ("L.Layer", "add_param", "get_output_for", "lasagne.init.", "L.DenseLayer"),
    "weight-layout": ("set_value(", "get_value()"),
    "loss": ("lasagne.objectives.categorical_crossentropy", "L.get_output("),
    "optimizer": ("lasagne.updates.adam",),
    ("optimizer", "cnn"): ("lasagne.updates.momentum",),
    "training-step": ("theano.function", "updates=updates"),
    "compilation": ("theano.function",),
    "prediction": ("get_output(", "deterministic=True"),
    "recurrent-layer": ("L.GRULayer",),
    "attention": ("T.batched_dot", "T.switch", "T.nnet.softmax"),
}

LACKS = {
    "device": "Theano here computes on the CPU only: its GPU back end, libgpuarray, is not installed.",
    "mixed-precision": "Theano has no bfloat16 type and computes float16 only in its absent GPU back end.",
    "sync": "Theano computes synchronously on the CPU, so a compiled function has finished when it returns.",
}
