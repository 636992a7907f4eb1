"""Datasets of the three workloads: download with checksums into data/, parse the real formats, or generate stand-ins.

`source` is one of "real" (download or reuse the verified cached file; fail if that is impossible),
"synthetic" (generated data of the same shapes and dtypes, with a learnable class signal) or
"auto" (real when it can be had, otherwise synthetic with a printed notice). Every loader returns
a `Dataset` whose `source` and `description` say which one it is, for the result record.
"""

import collections
import hashlib
import os
import pickle
import sys
import tarfile
import time
import urllib.request

import numpy as np

from common import checkout

SOURCES = ("real", "synthetic", "auto")

RemoteFile = collections.namedtuple("RemoteFile", "name url filename algorithm digest")
RemoteFile.__doc__ = "A file to download: its URL, the name it is cached under, and its checksum."

CIFAR10_FILE = RemoteFile(
    name="CIFAR-10",
    url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    filename="cifar-10-python.tar.gz",
    algorithm="md5",
    digest="c58f30108f718f92721af3b95e74349a",
)
IMDB_FILE = RemoteFile(
    name="IMDB",
    url="https://storage.googleapis.com/tensorflow/tf-keras-datasets/imdb.npz",
    filename="imdb.npz",
    algorithm="sha256",
    digest="69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f",
)

# The downloads by name, as the tasks (common/tasks/) name them.
REMOTE_FILES = {remote.name: remote for remote in (CIFAR10_FILE, IMDB_FILE)}

Dataset = collections.namedtuple("Dataset", "x_train y_train x_test y_test source description")
Dataset.__doc__ = "Train and test arrays plus where they came from (source: 'real' or 'synthetic')."

# Keras conventions for IMDB (keras.datasets.imdb.load_data defaults).
IMDB_START_TOKEN = 1
IMDB_OOV_TOKEN = 2
IMDB_INDEX_FROM = 3


class DownloadError(RuntimeError):
    """A file could not be fetched (network down, host unknown, HTTP error) after all retries."""


class ChecksumError(RuntimeError):
    """A file's checksum does not match the published one: it is truncated or corrupt and is never parsed."""


def data_dir():
    """Return the download cache folder: $ROSETTA_DATA_DIR, or data/ at the top of the checkout (common.checkout)."""
    return os.environ.get("ROSETTA_DATA_DIR") or os.path.join(checkout.install_folder(), "data")


def file_digest(path, algorithm):
    """Return the hex digest of a file under hashlib's `algorithm` ("md5", "sha256", ...)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path, remote):
    """Raise ChecksumError unless the file at `path` has the checksum `remote` publishes."""
    actual = file_digest(path, remote.algorithm)
    if actual != remote.digest:
        raise ChecksumError(
            "{} at {} is corrupt or truncated: {} {} != expected {}".format(
                remote.name, path, remote.algorithm, actual, remote.digest
            )
        )


def download(remote, directory=None, retries=3, timeout=60, quiet=False):
    """Return the path of `remote` in the cache, downloading and verifying it first if needed.

    A cached file that fails its checksum is removed and fetched again. The download goes to a
    temporary file beside the target and is renamed into place only after its checksum matched,
    so an interrupted or corrupt transfer never leaves a file that looks valid.
    """
    directory = directory or data_dir()
    if not os.path.isdir(directory):
        os.makedirs(directory)
    target = os.path.join(directory, remote.filename)
    if os.path.exists(target):
        try:
            verify_file(target, remote)
            return target
        except ChecksumError as error:
            _say(quiet, "{}; removing it and downloading again".format(error))
            os.remove(target)
    partial = "{}.part-{}".format(target, os.getpid())
    last_error = None
    for attempt in range(1, retries + 1):
        try:
            _fetch(remote, partial, timeout, quiet)
            verify_file(partial, remote)
            os.replace(partial, target)
            return target
        except (OSError, ChecksumError) as error:  # URLError and timeouts are OSErrors
            last_error = error
            if os.path.exists(partial):
                os.remove(partial)
            if attempt < retries:
                _say(quiet, "{} download attempt {}/{} failed ({}); retrying".format(remote.name, attempt, retries, error))
                time.sleep(min(2 ** (attempt - 1), 8))
    if isinstance(last_error, ChecksumError):
        raise last_error
    raise DownloadError("could not download {} from {} after {} tries: {}".format(remote.name, remote.url, retries, last_error))


def _fetch(remote, destination, timeout, quiet):
    """Stream `remote.url` into `destination`, printing progress every tenth of the file."""
    with urllib.request.urlopen(remote.url, timeout=timeout) as response, open(destination, "wb") as out:
        total = int(response.headers.get("Content-Length") or 0)
        done, next_report = 0, 0.1
        _say(quiet, "downloading {} from {}".format(remote.name, remote.url))
        for block in iter(lambda: response.read(1 << 20), b""):
            out.write(block)
            done += len(block)
            if total and done >= next_report * total:
                _say(quiet, "  {:3.0f}% of {:.1f} MB".format(100.0 * done / total, total / 1e6))
                next_report += 0.1


def _say(quiet, message):
    if not quiet:
        print(message)
        sys.stdout.flush()


def _check_source(source):
    if source not in SOURCES:
        raise ValueError("unknown data source {!r}; use one of: {}".format(source, ", ".join(SOURCES)))


def _fetch_or_fall_back(remote, source, directory):
    """Return the verified cached path of `remote`, or None when `source` is 'auto' and it cannot be had."""
    if source == "synthetic":
        return None
    try:
        return download(remote, directory)
    except DownloadError as error:
        if source == "real":
            raise
        print("NOTICE: {}; using synthetic data instead (the result records this)".format(error))
        sys.stdout.flush()
        return None


def _real_or_synthetic(remote, source, directory, read, generate, synthetic_description):
    """(train and test arrays, "real" or "synthetic", description): the verified download parsed by `read`,
    or `generate()`'s stand-in when `source` asks for it or allows it and the download cannot be had."""
    _check_source(source)
    path = _fetch_or_fall_back(remote, source, directory)
    if path is None:
        return generate(), "synthetic", synthetic_description
    return read(path), "real", "{} ({}, {} verified)".format(remote.name, remote.filename, remote.algorithm)


def _subset(x, y, count, rng):
    """A random subset of `count` samples (all when count is None), in a seeded order."""
    if count is None or count >= len(y):
        return x, y
    keep = np.sort(rng.permutation(len(y))[:count])
    return x[keep], y[keep]


# ---------------------------------------------------------------- CIFAR-10

def read_cifar10_archive(path):
    """Parse the CIFAR-10 python tarball into uint8 (N, 3, 32, 32) images and int64 labels, train and test."""

    def read_batch(archive, member):
        with archive.extractfile("cifar-10-batches-py/" + member) as f:
            batch = pickle.load(f, encoding="bytes")
        images = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        return images, np.asarray(batch[b"labels"], dtype=np.int64)

    with tarfile.open(path, "r:gz") as archive:
        train = [read_batch(archive, "data_batch_{}".format(i)) for i in range(1, 6)]
        x_test, y_test = read_batch(archive, "test_batch")
    x_train = np.concatenate([images for images, _ in train])
    y_train = np.concatenate([labels for _, labels in train])
    return x_train, y_train, x_test, y_test


def synthetic_cifar10(train_samples=50000, test_samples=10000, seed=0):
    """Generate CIFAR-10-shaped uint8 images whose class is a smooth colour pattern under noise and shifts."""
    rng = np.random.RandomState(seed)
    coarse = rng.uniform(-1.0, 1.0, size=(10, 3, 4, 4))
    templates = np.kron(coarse, np.ones((1, 1, 8, 8)))  # (10, 3, 32, 32), blocky low-frequency patterns

    def make(count, rng):
        labels = rng.randint(0, 10, size=count).astype(np.int64)
        images = np.empty((count, 3, 32, 32), dtype=np.uint8)
        for start in range(0, count, 5000):
            stop = min(start + 5000, count)
            n = stop - start
            pixels = 0.5 + 0.5 * templates[labels[start:stop]]  # strong enough to learn within 100 steps
            pixels += rng.normal(0.0, 0.25, size=(n, 3, 32, 32))
            pixels += rng.uniform(-0.15, 0.15, size=(n, 1, 1, 1))  # brightness
            shifts = rng.randint(-3, 4, size=n)  # horizontal jitter, so position alone is no giveaway
            for shift in np.unique(shifts):
                pixels[shifts == shift] = np.roll(pixels[shifts == shift], shift, axis=3)
            images[start:stop] = np.clip(pixels * 255.0, 0, 255).astype(np.uint8)
        return images, labels

    x_train, y_train = make(train_samples, rng)
    x_test, y_test = make(test_samples, rng)
    return x_train, y_train, x_test, y_test


def load_cifar10(source="auto", channels_last=False, train_samples=None, test_samples=None, seed=0, directory=None):
    """Return CIFAR-10 as float32 images in [0, 1], (N, 3, 32, 32) or (N, 32, 32, 3), and int64 labels."""
    (x_train, y_train, x_test, y_test), kind, description = _real_or_synthetic(
        CIFAR10_FILE, source, directory, read_cifar10_archive,
        lambda: synthetic_cifar10(train_samples or 50000, test_samples or 10000, seed),
        "synthetic CIFAR-10 stand-in (class patterns under noise), seed {}".format(seed))
    rng = np.random.RandomState(seed)
    x_train, y_train = _subset(x_train, y_train, train_samples, rng)
    x_test, y_test = _subset(x_test, y_test, test_samples, rng)

    def to_float(images):
        images = images.astype(np.float32) / np.float32(255.0)
        return np.ascontiguousarray(images.transpose(0, 2, 3, 1)) if channels_last else images

    return Dataset(to_float(x_train), y_train, to_float(x_test), y_test, kind, description)


# ---------------------------------------------------------------- IMDB

def pad_sequences(sequences, maxlen, value=0):
    """Cut or pad each sequence to `maxlen` int32 tokens like keras.utils.pad_sequences' defaults ('pre' both)."""
    out = np.full((len(sequences), maxlen), value, dtype=np.int32)
    for row, sequence in enumerate(sequences):
        tail = list(sequence)[-maxlen:]
        if tail:
            out[row, maxlen - len(tail):] = tail
    return out


def encode_imdb_reviews(reviews, vocab_size):
    """Apply the Keras IMDB conventions: start token 1, word indices shifted by 3, indices >= vocab_size become 2."""
    encoded = []
    for review in reviews:
        shifted = [IMDB_START_TOKEN] + [int(w) + IMDB_INDEX_FROM for w in review]
        encoded.append([w if w < vocab_size else IMDB_OOV_TOKEN for w in shifted])
    return encoded


def read_imdb_npz(path):
    """Read Keras' imdb.npz: word-index lists (most frequent word = 1) and 0/1 labels, train and test."""
    with np.load(path, allow_pickle=True) as f:
        return (list(f["x_train"]), np.asarray(f["y_train"], dtype=np.int64),
                list(f["x_test"]), np.asarray(f["y_test"], dtype=np.int64))


def synthetic_imdb(train_samples=25000, test_samples=25000, seed=0, dictionary_size=88000, longest=400):
    """Generate IMDB-like word-index reviews whose label shows in a class-dependent choice of words, 30 to `longest`
    words long (less one)."""
    rng = np.random.RandomState(seed)
    signal_words = rng.choice(np.arange(30, 3000), size=(2, 30), replace=False)

    def make(count):
        labels = rng.randint(0, 2, size=count).astype(np.int64)
        reviews = []
        for label in labels:
            length = rng.randint(30, longest)
            # Frequent words dominate, as in real text: ranks drawn log-uniformly.
            words = np.exp(rng.uniform(0.0, np.log(dictionary_size), size=length)).astype(np.int64) + 1
            marks = rng.uniform(size=length)
            own = marks < 0.15  # 15% of the words lean to the label, 3% to the other: learnable in 50 steps
            other = (marks >= 0.15) & (marks < 0.18)
            words[own] = rng.choice(signal_words[label], size=int(own.sum()))
            words[other] = rng.choice(signal_words[1 - label], size=int(other.sum()))
            reviews.append(words.tolist())
        return reviews, labels

    x_train, y_train = make(train_samples)
    x_test, y_test = make(test_samples)
    return x_train, y_train, x_test, y_test


def load_imdb(source="auto", vocab_size=30000, maxlen=150, train_samples=None, test_samples=None, seed=0, directory=None):
    """Return IMDB as int32 (N, maxlen) token arrays under the Keras conventions, and int64 0/1 labels."""
    (x_train, y_train, x_test, y_test), kind, description = _real_or_synthetic(
        IMDB_FILE, source, directory, read_imdb_npz,
        # reviews as long as IMDB's (most under 400 words), and longer where more tokens are asked for (a sweep)
        lambda: synthetic_imdb(train_samples or 25000, test_samples or 25000, seed, longest=max(400, maxlen)),
        "synthetic IMDB stand-in (class-dependent word choice), seed {}".format(seed))
    rng = np.random.RandomState(seed)
    train_index = _subset(np.arange(len(y_train)), y_train, train_samples, rng)[0]
    test_index = _subset(np.arange(len(y_test)), y_test, test_samples, rng)[0]

    def prepare(reviews, index):
        return pad_sequences(encode_imdb_reviews([reviews[i] for i in index], vocab_size), maxlen)

    return Dataset(prepare(x_train, train_index), y_train[train_index],
                   prepare(x_test, test_index), y_test[test_index], kind, description)


# ---------------------------------------------------------------- inference input

def fake_images(count, image_size=224, channels_last=False, seed=0):
    """Return `count` random float32 images, normalised like ImageNet input, for timing feature extraction.

    The same pixels in either layout: drawn channels first, then transposed for channels_last.
    """
    rng = np.random.RandomState(seed)
    images = rng.standard_normal((count, 3, image_size, image_size)).astype(np.float32)
    return np.ascontiguousarray(images.transpose(0, 2, 3, 1)) if channels_last else images



def fake_labels(count, num_classes, seed=0):
    """Return `count` random int64 class labels in [0, num_classes), for timing training on fake_images."""
    return np.random.RandomState(seed + 1).randint(0, num_classes, size=count).astype(np.int64)


# ---------------------------------------------------------------- batching

def batches(x, y, batch_size, shuffle=False, seed=0):
    """Yield (x, y) mini-batches of exactly `batch_size` samples (a last partial batch is dropped)."""
    order = np.random.RandomState(seed).permutation(len(y)) if shuffle else np.arange(len(y))
    for start in range(0, len(order) - batch_size + 1, batch_size):
        index = order[start:start + batch_size]
        yield x[index], y[index]


def count_batches(samples, batch_size):
    """How many whole batches `batches` yields for `samples` samples."""
    return samples // batch_size

