"""Keras 3's calls by concept (APIS: the code a reader of the concept must see) and the concepts its notebooks have
no cell for (LACKS, with the reason). A key is a concept of every task, or (concept, task) for one task only. One
notebook per task runs on every backend (TensorFlow, JAX, PyTorch): the calls are Keras', not the backend's."""

APIS = {
    "seeding": ("keras.utils.set_random_seed",),
    ("data-layout", "inference"): ("keras.config.set_image_data_format",),
    ("data-layout", "train"): ("keras.distribution.distribute_tensor",),
    ("model", "cnn"): ("keras.Sequential", "keras.Input"),
    ("model", "inference"): ("keras.applications.ResNet50",),
    ("model", "rnn"): ("keras.Sequential", "keras.layers.Embedding"),
    ("model", "transformer"): ("keras.Model", "layers.Layer"),
    ("model", "train"): ("keras.Model", "layers.Conv2D"),
    ("initialisation", "train"): ("keras.initializers.VarianceScaling",),
    ("weight-layout", "cnn"): ("get_weights", "set_weights"),
    ("weight-layout", "inference"): ("get_weights", "set_weights"),
    ("weight-layout", "rnn"): ("get_weights", "set_weights"),
    ("weight-layout", "transformer"): (".assign(",),
    ("weight-layout", "train"): (".assign(",),
    "loss": ("keras.losses.SparseCategoricalCrossentropy",),
    "optimizer": ("keras.optimizers.",),
    "mixed-precision": ("keras.mixed_precision.set_dtype_policy",),
    ("mixed-precision", "cnn"): ("keras.mixed_precision.set_dtype_policy", "LossScaleOptimizer"),
    ("mixed-precision", "rnn"): ("keras.mixed_precision.set_dtype_policy", "LossScaleOptimizer"),
    ("mixed-precision", "transformer"): ("keras.mixed_precision.set_dtype_policy", "LossScaleOptimizer"),
    ("mixed-precision", "train"): ("keras.mixed_precision.set_dtype_policy", "LossScaleOptimizer"),
    "compilation": ("model.compile(", "jit_compile="),
    ("prediction", "cnn"): ("model.evaluate(", "model.predict("),
    ("prediction", "inference"): ("model.predict_on_batch",),
    ("prediction", "rnn"): ("model.evaluate(", "model.predict("),
    ("prediction", "transformer"): ("model.evaluate(", "model.predict("),
    ("training-step", "train"): ("model.train_on_batch(",),
    ("training-loop", "cnn"): ("model.fit(", "keras.callbacks.LambdaCallback"),
    ("training-loop", "rnn"): ("model.fit(", "keras.callbacks.LambdaCallback"),
    ("training-loop", "transformer"): ("model.fit(", "keras.callbacks.LambdaCallback"),
    "recurrent-layer": ("keras.layers.GRU",),
    "attention": ("keras.layers.MultiHeadAttention", "attention_mask="),
    "data-parallel": ("keras.distribution.DataParallel", "keras.distribution.set_distribution",
                      "keras.distribution.initialize"),
}

LACKS = {
    ("training-step", "cnn"): "model.fit runs Keras' own train step on every batch (forward, loss, gradients, "
                              "update): Keras users write no step.",
    ("training-step", "rnn"): "model.fit runs Keras' own train step on every batch (forward, loss, gradients, "
                              "update): Keras users write no step.",
    ("training-step", "transformer"): "model.fit runs Keras' own train step on every batch (forward, loss, gradients, "
                                      "update): Keras users write no step.",
    "sync": "Keras hands back NumPy arrays and Python numbers from fit, predict_on_batch and train_on_batch, so the "
            "device's work is done when they return.",
    "all-reduce": "Under keras.distribution.DataParallel the backend's compiler adds the gradients' all-reduce to "
                  "Keras' own compiled train step.",
}
