"""TensorFlow's calls by concept (APIS: the code a reader of the concept must see) and the concepts its notebooks have
no cell for (LACKS, with the reason). A key is a concept of every task, or (concept, task) for one task only.
The notebooks use TensorFlow without Keras (tf.Module, tf.nn) but for Keras' ResNet-50 and GRU; TensorFlow's own
optimizers are Keras', so the optimizers and fp16 loss scaling are written out."""

APIS = {
    "imports": ("import tensorflow as tf",),
    "device": ('"/GPU:0"',),
    "seeding": ("tf.random.set_seed",),
    ("seeding", "rnn"): ("tf.random.set_seed", "keras.utils.set_random_seed"),
    "float32-policy": ("tf.config.experimental.enable_tensor_float_32_execution",),
    ("data-layout", "cnn"): ('"NCHW"', '"NHWC"'),
    ("data-layout", "train"): ("experimental_distribute_values_from_function",),
    "model": ("tf.Module",),
    ("model", "inference"): ("keras.applications.ResNet50",),
    ("initialisation", "cnn"): ("tf.random.uniform",),
    ("initialisation", "rnn"): ("tf.random.uniform",),
    ("initialisation", "transformer"): ("tf.random.uniform",),
    ("initialisation", "train"): ("tf.random.normal",),
    ("initialisation", "inference"): ('weights="imagenet"',),
    "weight-layout": (".assign(",),
    ("weight-layout", "inference"): ("set_weights(", "get_weights()"),
    "loss": ("tf.nn.sparse_softmax_cross_entropy_with_logits",),
    "optimizer": ("assign_sub(",),
    "training-step": ("tf.GradientTape", "tape.gradient("),
    "mixed-precision": ("tf.math.is_finite",),
    ("mixed-precision", "inference"): ("keras.mixed_precision.set_global_policy",),
    "compilation": ("tf.function", "jit_compile"),
    ("prediction", "cnn"): ("training=False",),
    ("prediction", "inference"): ("training=False",),
    ("prediction", "transformer"): ("training=False",),
    ("prediction", "rnn"): ("tf.function",),
    "sync": ("tf.test.experimental.sync_devices",),
    "timed-inference": ("tf.constant(",),
    "recurrent-layer": ("keras.layers.GRU", "reset_after=True"),
    "attention": ("tf.einsum", "tf.nn.softmax", "tf.not_equal(tokens, 0)", "-1e9"),
    "data-parallel": ("tf.distribute.MirroredStrategy", "tf.distribute.MultiWorkerMirroredStrategy",
                      "set_logical_device_configuration"),
    "all-reduce": ("batch_reduce_to", "tf.distribute.ReduceOp.MEAN"),
}

LACKS = {}
