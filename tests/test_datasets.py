import hashlib
import os

import numpy as np
import pytest
from formats import make_cifar10_tarball, make_imdb_npz

from common import datasets


def remote_for(path, name="TEST", algorithm="sha256", digest=None):
    """A RemoteFile served from a local file through a file:// URL, so the real download code runs."""
    if digest is None:
        digest = hashlib.new(algorithm, path.read_bytes()).hexdigest()
    return datasets.RemoteFile(name, path.as_uri(), "fetched-" + path.name, algorithm, digest)


def test_download_verifies_and_caches(tmp_path, data_cache):
    source = tmp_path / "payload.bin"
    source.write_bytes(os.urandom(3000))
    remote = remote_for(source, algorithm="md5")
    path = datasets.download(remote, quiet=True)
    assert open(path, "rb").read() == source.read_bytes()
    assert os.path.dirname(path) == str(data_cache)
    source.write_bytes(b"changed upstream")  # a cached, verified file is reused without fetching
    assert datasets.download(remote, quiet=True) == path
    assert not [name for name in os.listdir(str(data_cache)) if ".part-" in name]


def test_corrupt_download_is_rejected_and_leaves_nothing(tmp_path, data_cache):
    source = tmp_path / "payload.bin"
    source.write_bytes(b"truncated")
    remote = remote_for(source, digest="0" * 64)
    with pytest.raises(datasets.ChecksumError, match="corrupt or truncated"):
        datasets.download(remote, retries=2, quiet=True)
    assert os.listdir(str(data_cache)) == []


def test_corrupt_cached_file_is_replaced(tmp_path, data_cache):
    source = tmp_path / "payload.bin"
    source.write_bytes(b"the real bytes")
    remote = remote_for(source)
    (data_cache / remote.filename).write_bytes(b"the real by")  # truncated earlier
    path = datasets.download(remote, quiet=True)
    assert open(path, "rb").read() == b"the real bytes"


def test_unreachable_host_raises_download_error_after_retries(tmp_path, data_cache):
    remote = datasets.RemoteFile("GONE", (tmp_path / "missing.bin").as_uri(), "gone.bin", "md5", "0" * 32)
    with pytest.raises(datasets.DownloadError, match="after 2 tries"):
        datasets.download(remote, retries=2, quiet=True)


def test_read_cifar10_archive_parses_the_real_format(tmp_path):
    content = make_cifar10_tarball(tmp_path / "cifar.tar.gz", per_batch=7)
    x_train, y_train, x_test, y_test = datasets.read_cifar10_archive(str(tmp_path / "cifar.tar.gz"))
    assert x_train.shape == (35, 3, 32, 32) and x_train.dtype == np.uint8
    assert x_test.shape == (7, 3, 32, 32)
    first_images, first_labels = content["data_batch_1"]
    np.testing.assert_array_equal(x_train[0].reshape(-1), first_images[0])  # channel-major rows, as published
    assert list(y_train[:7]) == first_labels
    assert list(y_test) == content["test_batch"][1]


def test_load_cifar10_real_through_a_verified_cache(tmp_path, data_cache, monkeypatch):
    make_cifar10_tarball(data_cache / "cifar-10-python.tar.gz", per_batch=10)
    digest = datasets.file_digest(str(data_cache / "cifar-10-python.tar.gz"), "md5")
    monkeypatch.setattr(datasets, "CIFAR10_FILE", datasets.CIFAR10_FILE._replace(digest=digest))
    data = datasets.load_cifar10("real", channels_last=True, train_samples=20)
    assert data.source == "real"
    assert data.x_train.shape == (20, 32, 32, 3) and data.x_train.dtype == np.float32
    assert data.x_test.shape == (10, 32, 32, 3)
    assert 0.0 <= data.x_train.min() and data.x_train.max() <= 1.0


def test_load_cifar10_real_refuses_a_corrupt_cache_offline(data_cache, monkeypatch):
    (data_cache / "cifar-10-python.tar.gz").write_bytes(b"not a tarball")
    monkeypatch.setattr(datasets, "CIFAR10_FILE", datasets.CIFAR10_FILE._replace(url="file:///nonexistent/cifar"))
    with pytest.raises(datasets.DownloadError):
        datasets.load_cifar10("real")
    assert not (data_cache / "cifar-10-python.tar.gz").exists()  # never parsed, removed


def test_auto_falls_back_to_synthetic_with_a_notice(data_cache, monkeypatch, capsys):
    monkeypatch.setattr(datasets, "CIFAR10_FILE", datasets.CIFAR10_FILE._replace(url="file:///nonexistent/cifar"))
    monkeypatch.setattr(datasets.time, "sleep", lambda seconds: None)
    data = datasets.load_cifar10("auto", train_samples=30, test_samples=10)
    assert data.source == "synthetic"
    assert "NOTICE" in capsys.readouterr().out


def test_unknown_source_is_rejected():
    with pytest.raises(ValueError, match="unknown data source 'fake'"):
        datasets.load_cifar10("fake")


def test_synthetic_cifar10_shapes_and_learnable_signal():
    data = datasets.load_cifar10("synthetic", train_samples=2000, test_samples=500, seed=3)
    assert data.x_train.shape == (2000, 3, 32, 32) and data.y_train.dtype == np.int64
    assert set(np.unique(data.y_train)) == set(range(10))
    # A nearest-class-mean classifier learns it far above chance (0.1): a network can too.
    means = np.stack([data.x_train[data.y_train == k].mean(0).ravel() for k in range(10)])
    distances = ((data.x_test.reshape(500, 1, -1) - means[None]) ** 2).sum(-1)
    assert (distances.argmin(1) == data.y_test).mean() > 0.5


def test_synthetic_data_is_deterministic_per_seed():
    a = datasets.load_cifar10("synthetic", train_samples=50, test_samples=10, seed=1)
    b = datasets.load_cifar10("synthetic", train_samples=50, test_samples=10, seed=1)
    c = datasets.load_cifar10("synthetic", train_samples=50, test_samples=10, seed=2)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    assert not np.array_equal(a.x_train, c.x_train)


def test_pad_sequences_matches_keras_defaults():
    padded = datasets.pad_sequences([[1, 2, 3], [4, 5, 6, 7, 8], []], maxlen=4)
    np.testing.assert_array_equal(padded, [[0, 1, 2, 3], [5, 6, 7, 8], [0, 0, 0, 0]])
    assert padded.dtype == np.int32


def test_encode_imdb_reviews_keras_conventions():
    # word 1 (most frequent) -> 4; 29996 -> 29999 stays; 29997 -> 30000 is out of vocabulary -> 2
    assert datasets.encode_imdb_reviews([[1, 29996, 29997]], vocab_size=30000) == [[1, 4, 29999, 2]]


def test_load_imdb_real_from_an_npz_in_the_real_format(data_cache, monkeypatch):
    reviews = [[1, 2, 3], list(range(1, 200)), [40000]]
    make_imdb_npz(data_cache / "imdb.npz", reviews, [0, 1, 1], [[5, 6]], [1])
    digest = datasets.file_digest(str(data_cache / "imdb.npz"), "sha256")
    monkeypatch.setattr(datasets, "IMDB_FILE", datasets.IMDB_FILE._replace(digest=digest))
    data = datasets.load_imdb("real", vocab_size=30000, maxlen=150)
    assert data.source == "real" and data.x_train.shape == (3, 150) and data.x_train.dtype == np.int32
    np.testing.assert_array_equal(data.x_train[0, -4:], [1, 4, 5, 6])
    assert data.x_train[1, 0] == 200 - 150 + 3  # pre-truncation keeps the end of a long review
    np.testing.assert_array_equal(data.x_train[2, -2:], [1, 2])  # out-of-vocabulary word
    np.testing.assert_array_equal(data.x_test[0, -3:], [1, 8, 9])


def test_synthetic_imdb_is_learnable_from_word_counts():
    data = datasets.load_imdb("synthetic", train_samples=1000, test_samples=400, seed=0)
    assert data.x_train.shape == (1000, 150) and data.x_train.max() < 30000
    assert (data.x_train[:, -150:] != 0).any(axis=1).all()

    def counts(x):
        return np.stack([np.bincount(row, minlength=30000) for row in x]).astype(np.float32)

    train, test = counts(data.x_train), counts(data.x_test)
    weight = train[data.y_train == 1].mean(0) - train[data.y_train == 0].mean(0)
    weight[:3] = 0  # padding, start and out-of-vocabulary tokens carry no label
    weight[np.argsort(np.abs(weight))[:-200]] = 0  # keep the 200 most telling words, learnt from training data
    scores = test @ weight
    predicted = (scores > np.median(scores)).astype(np.int64)
    assert (predicted == data.y_test).mean() > 0.75


def test_batches_are_whole_and_shuffled_per_seed():
    x = np.arange(10)
    sizes = [len(xb) for xb, _ in datasets.batches(x, x, 4)]
    assert sizes == [4, 4] and datasets.count_batches(10, 4) == 2
    first = np.concatenate([xb for xb, _ in datasets.batches(x, x, 5, shuffle=True, seed=0)])
    again = np.concatenate([xb for xb, _ in datasets.batches(x, x, 5, shuffle=True, seed=0)])
    other = np.concatenate([xb for xb, _ in datasets.batches(x, x, 5, shuffle=True, seed=1)])
    np.testing.assert_array_equal(first, again)
    assert sorted(first) == list(range(10)) and not np.array_equal(first, other)
    for xb, yb in datasets.batches(x, x * 2, 3, shuffle=True):
        np.testing.assert_array_equal(yb, xb * 2)


def test_fake_images_layouts():
    assert datasets.fake_images(2, 32).shape == (2, 3, 32, 32)
    assert datasets.fake_images(2, 32, channels_last=True).shape == (2, 32, 32, 3)
    assert datasets.fake_images(1).dtype == np.float32
    # the same pixels whichever layout a framework asks for
    assert np.array_equal(datasets.fake_images(2, 8, channels_last=True), datasets.fake_images(2, 8).transpose(0, 2, 3, 1))


def test_fake_labels_are_classes_and_repeat_with_their_seed():
    labels = datasets.fake_labels(500, 10, seed=3)
    assert labels.dtype == np.int64 and labels.min() >= 0 and labels.max() == 9 and len(set(labels)) == 10
    assert (datasets.fake_labels(500, 10, seed=3) == labels).all() and not (datasets.fake_labels(500, 10) == labels).all()


def test_the_stand_in_reviews_grow_to_a_longer_sequence_length():
    """A sequence-length sweep past IMDB's usual 400 words gets reviews that long, not padding; up to 400 words the
    stand-in is what it always was."""
    usual = datasets.load_imdb("synthetic", maxlen=150, train_samples=64, test_samples=64)
    longer = datasets.load_imdb("synthetic", maxlen=2048, train_samples=64, test_samples=64)
    words = (longer.x_train != 0).sum(axis=1)
    assert words.max() > 1000 and words.min() >= 30
    assert (usual.x_train == datasets.load_imdb("synthetic", maxlen=150, train_samples=64, test_samples=64).x_train).all()
    assert (usual.x_train != 0).sum(axis=1).max() == 150


def test_the_data_folder_is_the_checkout_s_that_rosetta_checkout_names(monkeypatch, tmp_path):
    from common import checkout

    monkeypatch.delenv("ROSETTA_DATA_DIR", raising=False)
    monkeypatch.delenv(checkout.INSTALL_VARIABLE, raising=False)
    assert datasets.data_dir() == os.path.join(checkout.CODE_FOLDER, "data")  # the code's own checkout
    monkeypatch.setenv(checkout.INSTALL_VARIABLE, str(tmp_path))  # a Ray node running shipped code
    assert checkout.install_folder() == str(tmp_path) and datasets.data_dir() == str(tmp_path / "data")
