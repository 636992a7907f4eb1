"""Keras 2.3's calls by concept (APIS: the code a reader of the concept must see) and the concepts its notebooks have
no cell for (LACKS, with the reason). A key is a concept of every task, or (concept, task) for one task only. One
notebook per task runs on CNTK and on Theano: the calls are Keras', not the backend's."""

APIS = {
    "seeding": ("np.random.seed",),
    ("data-layout", "cnn"): ("keras.backend.set_image_data_format",),
    ("data-layout", "inference"): ("keras.backend.set_image_data_format",),
    ("model", "cnn"): ("keras.Sequential", "input_shape="),
    ("model", "inference"): ("keras.applications.ResNet50",),
    ("model", "rnn"): ("keras.layers.Embedding",),
    ("model", "transformer"): ("keras.layers.Layer", "add_weight(", "keras.Model"),
    "weight-layout": ("get_weights", "set_weights"),
    "loss": ("keras.losses.SparseCategoricalCrossentropy",),
    "optimizer": ("keras.optimizers.",),
    ("compilation", "cnn"): ("model.compile(", "_make_train_function"),
    ("compilation", "rnn"): ("model.compile(", "_make_train_function"),
    ("compilation", "transformer"): ("model.compile(", "_make_train_function"),
    ("prediction", "cnn"): ("model.evaluate(", "model.predict("),
    ("prediction", "inference"): ("model.predict_on_batch",),
    ("prediction", "rnn"): ("model.evaluate(", "model.predict("),
    ("prediction", "transformer"): ("model.evaluate(", "model.predict("),
    "training-loop": ("model.fit(", "keras.callbacks.LambdaCallback"),
    "recurrent-layer": ("keras.layers.GRU", "reset_after=True"),
    "attention": ("K.batch_dot", "K.softmax", "K.not_equal"),
}

LACKS = {
    "training-step": "model.fit runs the training function Keras 2 builds from compile; its users write no step.",
    "mixed-precision": "Keras 2.3 has no mixed precision: its floatx is one dtype for weights and computation, "
                       "without loss scaling.",
    "sync": "Keras 2 hands back NumPy arrays and Python numbers from fit and predict_on_batch, so the backend's work "
            "is done when they return.",
    ("compilation", "inference"): "Keras 2 builds and compiles the backend's prediction function inside "
                                  "predict_on_batch, at its first call in the warm-up.",
}
