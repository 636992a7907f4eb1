"""JAX's calls by concept, with Flax NNX and Optax (APIS: the code a reader of the concept must see) and the concepts
its notebooks have no cell for (LACKS, with the reason). A key is a concept of every task, or (concept, task) for one
task only."""

APIS = {
    "imports": ("from flax import nnx",),
    "device": ("jax.devices",),
    "seeding": ("nnx.Rngs",),
    "float32-policy": ("jax_default_matmul_precision",),
    "model": ("nnx.Module",),
    "loss": ("optax.softmax_cross_entropy_with_integer_labels",),
    ("optimizer", "cnn"): ("optax.sgd", "nnx.Optimizer"),
    ("optimizer", "rnn"): ("optax.adam", "nnx.Optimizer"),
    ("optimizer", "transformer"): ("optax.adamw", "nnx.Optimizer"),
    ("optimizer", "train"): ("optax.sgd", "nnx.Optimizer"),
    "training-step": ("nnx.value_and_grad", "optimizer.update("),
    "mixed-precision": ("jax.numpy.bfloat16", "DynamicScale", "optax.apply_if_finite", "scale.value_and_grad"),
    ("mixed-precision", "inference"): ("jax.numpy.bfloat16",),
    "compilation": ("nnx.jit", ".lower(", ".compile()"),
    ("compilation", "inference"): ("nnx.jit",),
    ("compilation", "train"): ("jax.jit",),
    "prediction": ("nnx.jit", "model.eval()"),
    ("prediction", "rnn"): ("nnx.jit",),  # no dropout: the model has no training mode to leave
    "sync": ("block_until_ready",),
    "recurrent-layer": ("nnx.GRUCell", "nnx.RNN"),
    "attention": ("jax.nn.dot_product_attention", "mask="),
    "data-parallel": ("Mesh(", "NamedSharding", "jax.shard_map", "jax.distributed.initialize"),
    "all-reduce": ("jax.lax.pmean",),
}

LACKS = {}
