"""Caffe2's calls by concept (APIS: the code a reader of the concept must see) and the concepts its notebooks have
no cell for (LACKS, with the reason). A key is a concept of every task, or (concept, task) for one task only."""

APIS = {
    "imports": ("from caffe2.python import", "workspace"),
    "device": ("core.DeviceOption",),
    ("device", "inference"): ("core.DeviceOption", "caffe2_pb2.IDEEP"),
    "seeding": ("random_seed=",),
    "data-layout": ("workspace.FeedBlob",),
    ("model", "cnn"): ("model_helper.ModelHelper", "brew.conv", "brew.max_pool", "brew.fc", "core.DeviceScope"),
    ("model", "inference"): ("model_helper.ModelHelper", "resnet.create_resnet50", "core.DeviceScope"),
    ("model", "rnn"): ("model_helper.ModelHelper", "model.create_param", "Gather", "brew.fc", "core.DeviceScope"),
    ("model", "transformer"): ("model_helper.ModelHelper", "brew.layer_norm", "brew.fc", "Gelu", "core.DeviceScope"),
    ("model", "train"): ("resnet.create_resnet50", "ParameterSharing", "core.NameScope"),
    "initialisation": ("param_init_net", "workspace.RunNetOnce"),
    "weight-layout": ("workspace.FeedBlob", "workspace.FetchBlob"),
    "loss": ("SoftmaxWithLoss",),
    ("loss", "train"): ("resnet.create_resnet50", "label=y"),  # the zoo's model adds SoftmaxWithLoss given labels
    ("optimizer", "cnn"): ("optimizer.build_sgd", "nesterov=False"),
    ("optimizer", "rnn"): ("optimizer.build_adam", "sparse_dedup_aggregator"),
    ("optimizer", "transformer"): ("optimizer.build_adam", "net.Scale"),
    ("optimizer", "train"): ("optimizer.build_sgd", "nesterov=False"),
    "training-step": ("AddGradientOperators", "workspace.RunNet("),
    ("training-step", "train"): ("workspace.RunNet(",),
    "compilation": ("workspace.CreateNet",),
    "prediction": ("init_params=False", "workspace.RunNet(", "workspace.FetchBlob"),
    ("prediction", "inference"): ("workspace.RunNet(", "workspace.FetchBlob"),
    "recurrent-layer": ("gru_cell.GRU", "linear_before_reset=True"),
    "attention": ("BatchMatMul", "trans_b=1", "Softmax", "net.Log", "StopGradient"),
    "data-parallel": ("data_parallel_model.Parallelize", "FileStoreHandlerCreate", "rendezvous="),
    "all-reduce": ('"Sum"', '"Allreduce"', "model.net.Proto()"),
}

LACKS = {
    "float32-policy": "Caffe2's CUDA 10.2 build predates TF32, so float32 is computed in full float32.",
    "mixed-precision": "Not written: Caffe2's float16 needs hand-placed casts and float32 master weights, GPU only.",
    "sync": "workspace.RunNet returns only when the whole net has run, device work included.",
}
