"""MXNet's calls by concept (APIS: the code a reader of the concept must see) and the concepts its notebooks have
no cell for (LACKS, with the reason). A key is a concept of every task, or (concept, task) for one task only."""

APIS = {
    "device": ("mx.gpu(", "mx.cpu("),
    "seeding": ("mx.random.seed",),
    "float32-policy": ("NVIDIA_TF32_OVERRIDE",),
    ("data-layout", "train"): ("gluon.utils.split_and_load",),
    ("model", "cnn"): ("gluon.nn.HybridSequential",),
    ("model", "inference"): ("vision.resnet50_v1",),
    "model": ("gluon.HybridBlock", "hybrid_forward"),
    ("initialisation", "inference"): ("pretrained=True", "initialize("),
    "initialisation": ("initialize(",),
    "weight-layout": ("set_data(",),
    "loss": ("gluon.loss.SoftmaxCrossEntropyLoss",),
    ("optimizer", "transformer"): ("gluon.Trainer", "mx.optimizer.register", "mx.nd.adam_update"),
    "optimizer": ("gluon.Trainer",),
    ("training-step", "train"): ("autograd.record", "autograd.backward(", "trainer.step("),
    "training-step": ("autograd.record", ".backward()", "trainer.step("),
    ("mixed-precision", "inference"): ("amp.init(",),
    "mixed-precision": ("amp.init(", "amp.init_trainer", "amp.scale_loss"),
    "compilation": ("hybridize(", "static_alloc"),
    "sync": ("mx.nd.waitall",),
    "recurrent-layer": ("gluon.rnn.GRU",),
    "attention": ("F.batch_dot", "F.softmax", "-1e9"),
    "data-parallel": ("mx.kv.create", "DMLC_ROLE"),
    "all-reduce": ("kvstore=kvstore",),
}

LACKS = {}
