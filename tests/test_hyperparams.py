import pytest

from common import hyperparams


def test_full_profile_is_the_reference_definition():
    cnn = hyperparams.for_task("cnn", "full")
    assert (cnn["epochs"], cnn["batch_size"], cnn["lr"], cnn["momentum"]) == (10, 64, 0.01, 0.9)
    rnn = hyperparams.for_task("rnn", "full")
    assert (rnn["epochs"], rnn["vocab_size"], rnn["maxlen"], rnn["embedding_dim"], rnn["hidden_units"]) == (
        3, 30000, 150, 125, 100)
    assert (rnn["lr"], rnn["beta1"], rnn["beta2"], rnn["eps"]) == (0.001, 0.9, 0.999, 1e-8)
    inference = hyperparams.for_task("inference", "full")
    assert inference["batch_size"] * inference["batches"] == 1280


def test_profiles_only_change_known_keys_and_shrink_the_work():
    for profile, tasks in hyperparams.PROFILES.items():
        for task, changes in tasks.items():
            assert set(changes) <= set(hyperparams.FULL[task]), (profile, task)
    quick = hyperparams.for_task("cnn", "quick")
    smoke = hyperparams.for_task("cnn", "smoke")
    assert smoke["train_samples"] < quick["train_samples"]
    assert quick["batch_size"] == 64  # profiles shrink the data, never the model or the optimiser


def test_overrides_apply_last_and_are_checked():
    assert hyperparams.for_task("cnn", "quick", {"epochs": 3})["epochs"] == 3
    with pytest.raises(ValueError, match="unknown hyperparameter 'epoch'"):
        hyperparams.for_task("cnn", "quick", {"epoch": 3})


def test_for_task_returns_a_copy():
    hyperparams.for_task("cnn")["epochs"] = 99
    assert hyperparams.for_task("cnn")["epochs"] == 10


@pytest.mark.parametrize("task, profile", [("gan", "full"), ("cnn", "fast")])
def test_unknown_names_are_rejected_with_the_known_ones(task, profile):
    with pytest.raises(ValueError, match="known"):
        hyperparams.for_task(task, profile)
