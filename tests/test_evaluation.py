import numpy as np
import pytest

from common import evaluation


def test_accuracy_counts_whole_batches_of_argmax_hits():
    y = np.array([0, 1, 2, 1, 0, 2, 1])
    x = np.eye(3, dtype=np.float32)[y]  # logits that point at the label ...
    x[[1, 4]] = x[[1, 4]][:, ::-1]  # ... except in two samples (1 -> 1 stays right: the reversal keeps the middle)
    seen = []

    def logits_of(batch):
        seen.append(len(batch))
        return batch

    accuracy, samples = evaluation.test_accuracy(logits_of, x, y, batch_size=3)
    assert seen == [3, 3] and samples == 6  # the last partial batch is left out
    assert accuracy == pytest.approx(5 / 6)  # sample 4 (label 0, reversed to 2) is the one miss


def test_accuracy_without_a_whole_batch_is_an_error():
    with pytest.raises(ValueError, match="no whole batch of 64 in 10 test samples"):
        evaluation.test_accuracy(lambda b: b, np.zeros((10, 2)), np.zeros(10, dtype=int), 64)
