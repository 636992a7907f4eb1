"""Exercise `common` end to end under another Python (run as a script by test_compatibility.py).

Written for Python 3.6 and numpy 1.19: no f-strings with '=', no walrus, no dataclasses.
"""

import json
import os
import sys
import tempfile

import numpy as np
from formats import make_cifar10_tarball, make_imdb_npz

from common import datasets, environment, flops, gpu, hyperparams, results, tasks, timing, weights


def main():
    """Run every public piece of `common` once on small data and print a JSON summary."""
    scratch = tempfile.mkdtemp()
    os.environ["ROSETTA_DATA_DIR"] = scratch
    params = hyperparams.for_task("rnn", "smoke", {"epochs": 2})
    assert params["epochs"] == 2

    cifar = datasets.load_cifar10("synthetic", channels_last=True, train_samples=64, test_samples=16)
    assert cifar.x_train.shape == (64, 32, 32, 3) and cifar.x_train.dtype == np.float32
    make_cifar10_tarball(os.path.join(scratch, "c.tar.gz"), per_batch=3)
    x_train, y_train, x_test, y_test = datasets.read_cifar10_archive(os.path.join(scratch, "c.tar.gz"))
    assert x_train.shape == (15, 3, 32, 32) and y_test.shape == (3,)

    make_imdb_npz(os.path.join(scratch, "imdb.npz"), [[1, 2], [40000]], [0, 1], [[3]], [1])
    reviews = datasets.read_imdb_npz(os.path.join(scratch, "imdb.npz"))[0]
    assert datasets.pad_sequences(datasets.encode_imdb_reviews(reviews, 30000), 4).tolist() == [[0, 1, 4, 5], [0, 0, 1, 2]]
    imdb = datasets.load_imdb("synthetic", train_samples=32, test_samples=8)
    assert imdb.x_train.shape == (32, 150) and imdb.x_train.dtype == np.int32
    assert sum(1 for _ in datasets.batches(imdb.x_train, imdb.y_train, 10, shuffle=True)) == 3
    assert datasets.fake_images(1, 8).shape == (1, 3, 8, 8)
    digest = datasets.file_digest(os.path.join(scratch, "imdb.npz"), "sha256")
    remote = datasets.RemoteFile("T", "file://" + os.path.join(scratch, "imdb.npz"), "copy.npz", "sha256", digest)
    assert os.path.exists(datasets.download(remote, quiet=True))

    with timing.Timer(lambda: None) as timer:
        sum(range(1000))
    record = results.new_record("Check", "cnn", "smoke", params=params)
    record.update(device="cpu", data={"source": cifar.source, "description": cifar.description},
                  environment=environment.facts("Check", "0", "cpu", threads=1))
    record["timings"] = timing.training_timings([timer.elapsed, timer.elapsed])
    record["metrics"] = {"train_s": record["timings"]["train_s"], "accuracy": np.float32(0.5)}
    cnn = hyperparams.for_task("cnn", "smoke")
    reference = weights.reference_weights("cnn", cnn, seed=3)
    stored_weights = os.path.join(scratch, "w.npz")
    weights.save_weights(stored_weights, "cnn", cnn, reference, logits=np.zeros((2, 10)))
    loaded = weights.load_weights(stored_weights, "cnn", cnn)
    assert all(np.array_equal(loaded[name], reference[name]) for name in reference)
    assert loaded[weights.LOGITS].shape == (2, 10)
    assert len(weights.shapes("inference", {})) == 265

    assert tasks.get("cnn").training_flops(cnn) == 3 * 124528640 - 2 * 9 * 3 * 50 * 1024 and flops.resnet50_forward_flops(96) > 0
    assert "cpu_simd" in record["environment"] and record["environment"]["computed_precision"] == "fp32"
    assert gpu.device_kind("@cupy:0") == "gpu" and gpu.device_kind("cpu(0)") == "cpu"
    assert isinstance(gpu.query_nvidia_smi()["gpus"], list) and isinstance(gpu.cuda_devices(), list)
    assert environment.choose_device("cpu", "Check", [], lambda: "no GPU") == ("cpu", None)
    assert flops.gpu_peak_tflops("NVIDIA A10")["gpu"] == "A10" and flops.gpu_peak_estimate("8.6", 80, 1710) > 0

    path = os.path.join(scratch, "r.json")
    results.write_result(path, record)
    stored = results.read_result(path)
    print(json.dumps({"python": sys.version.split()[0], "numpy": np.__version__, "status": stored["status"]}))


if __name__ == "__main__":
    main()
