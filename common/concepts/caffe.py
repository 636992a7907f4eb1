"""Caffe's calls by concept (APIS: the code a reader of the concept must see) and the concepts its notebooks have
no cell for (LACKS, with the reason). A key is a concept of every task, or (concept, task) for one task only."""

APIS = {
    "imports": ("import caffe", "from caffe import layers as L"),
    "device": ("caffe.set_mode_cpu",),
    "seeding": ("caffe.set_random_seed",),
    ("seeding", "cnn"): ("caffe.set_random_seed", "random_seed=seed"),
    ("seeding", "rnn"): ("caffe.set_random_seed", "random_seed=seed"),
    "data-layout": (".data[...] = ",),
    ("model", "cnn"): ("caffe.NetSpec", "L.Convolution", "L.Pooling", "L.InnerProduct", "to_proto()"),
    ("model", "inference"): ("caffe.NetSpec", "L.Convolution", "L.BatchNorm", "L.Scale", "L.Pooling", "L.Eltwise"),
    ("model", "rnn"): ("caffe.NetSpec", "L.Embed", "L.InnerProduct", "to_proto()"),
    "initialisation": ("caffe.get_solver",),
    ("initialisation", "inference"): ("caffe.Net(", "caffe.TEST"),
    "weight-layout": (".params[",),
    "loss": ("L.SoftmaxWithLoss",),
    ("optimizer", "cnn"): ("caffe_pb2.SolverParameter", 'type="SGD"', "momentum="),
    ("optimizer", "rnn"): ("caffe_pb2.SolverParameter", 'type="Adam"', "momentum2=", "delta="),
    "training-step": ("solver.step(1)",),
    "prediction": ("caffe.TEST", "share_with", ".forward()"),
    ("prediction", "inference"): (".forward()",),
    "recurrent-layer": ("L.InnerProduct", "L.Slice", "L.Sigmoid", "L.TanH", "L.Eltwise", "param="),
}

LACKS = {
    "float32-policy": "Caffe's CPU build has one float32 mode: full float32 products through its BLAS.",
    "mixed-precision": "Caffe 1.0's layers exist in float32 and float64 only; float16 came with NVIDIA's fork.",
    "compilation": "Caffe has no compiler or graph mode: its C++ engine runs the prototxt's layers one by one.",
    "sync": "Caffe computes synchronously on the CPU, so every call returns with its work done.",
}
