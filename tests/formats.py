"""Writers of small data files in the real published formats (CIFAR-10 tarball, Keras imdb.npz), for tests.

Plain Python 3.6+ and numpy: the compatibility check runs this under the oldest supported Python too.
"""

import io
import pickle
import tarfile

import numpy as np


def make_cifar10_tarball(path, per_batch=20, seed=0):
    """Write a CIFAR-10 python tarball (the real layout and pickle format) with `per_batch` images a batch."""
    rng = np.random.RandomState(seed)
    content = {}
    with tarfile.open(str(path), "w:gz") as archive:
        for member in ["data_batch_{}".format(i) for i in range(1, 6)] + ["test_batch"]:
            images = rng.randint(0, 256, size=(per_batch, 3072)).astype(np.uint8)
            labels = [int(v) for v in rng.randint(0, 10, size=per_batch)]
            content[member] = (images, labels)
            payload = pickle.dumps({b"batch_label": member.encode(), b"labels": labels, b"data": images,
                                    b"filenames": [b"x.png"] * per_batch}, protocol=2)
            info = tarfile.TarInfo("cifar-10-batches-py/" + member)
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return content


def make_imdb_npz(path, reviews_train, labels_train, reviews_test, labels_test):
    """Write an imdb.npz like Keras': object arrays of word-index lists and integer labels."""

    def as_objects(reviews):
        out = np.empty(len(reviews), dtype=object)
        for i, review in enumerate(reviews):
            out[i] = list(review)
        return out

    np.savez(str(path), x_train=as_objects(reviews_train), y_train=np.asarray(labels_train),
             x_test=as_objects(reviews_test), y_test=np.asarray(labels_test))
