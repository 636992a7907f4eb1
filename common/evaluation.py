"""Test accuracy from a framework's own prediction function, the same way in every notebook."""

from common import datasets


def test_accuracy(logits_of, x, y, batch_size):
    """(accuracy, samples counted): the share of whole test batches whose largest logit is the label.

    `logits_of` maps a NumPy batch to the model's NumPy logits (each notebook defines it the way
    its framework predicts, in inference mode); a last partial batch is left out, as in training.
    """
    correct = total = 0
    for xb, yb in datasets.batches(x, y, batch_size):
        correct += int((logits_of(xb).argmax(axis=1) == yb).sum())
        total += len(yb)
    if not total:
        raise ValueError("no whole batch of {} in {} test samples".format(batch_size, len(y)))
    return correct / total, total
