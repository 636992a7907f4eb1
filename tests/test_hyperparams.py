import pytest

from common import hyperparams, tasks


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
    for task in tasks.TASKS.values():
        assert set(task.profiles) <= set(hyperparams.PROFILES) - {"full"}, task
        for profile, changes in task.profiles.items():
            assert set(changes) <= set(task.hyperparameters), (profile, task)
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


def test_every_hyperparameter_has_a_rule_and_every_profile_keeps_to_them():
    for task in tasks.TASKS.values():
        assert set(task.hyperparameters) <= set(hyperparams.rules_of(task)), task
        for profile in hyperparams.PROFILES:
            hyperparams.for_task(task.key, profile)  # raises if a profile's value breaks a rule


@pytest.mark.parametrize("task, overrides, message", [
    ("cnn", {"epochs": -1}, "hyperparameter epochs=-1 for task cnn: must be an integer >= 1"),
    ("cnn", {"epochs": 1.5}, "epochs=1.5 for task cnn: must be an integer >= 1"),
    ("cnn", {"epochs": True}, "epochs=True for task cnn: must be an integer"),
    ("rnn", {"lr": "abc"}, "lr='abc' for task rnn: must be a number >= 0.0"),
    ("rnn", {"lr": float("nan")}, "lr=nan for task rnn"),
    ("cnn", {"conv_dropout": 1.0}, "conv_dropout=1.0 for task cnn: must be a number >= 0.0 and < 1.0"),
    ("cnn", {"train_samples": 0}, "train_samples=0 for task cnn: must be an integer >= 1, or None for all"),
    ("cnn", {"test_samples": 10}, "test_samples=10 for task cnn: must be at least batch_size=64 (whole batches only)"),
    ("inference", {"weights": "imagnet"}, "weights='imagnet' for task inference: must be one of 'auto', 'imagenet'"),
    ("inference", {"features": 1000}, "features=1000 for task inference: must be one of 2048"),
])
def test_a_value_outside_its_rule_is_one_line_naming_it(task, overrides, message):
    with pytest.raises(ValueError) as error:
        hyperparams.for_task(task, "quick", overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_values_at_the_edges_of_their_rules_pass():
    assert hyperparams.for_task("rnn", "smoke", {"lr": 0.0, "beta2": 0.0, "train_samples": 64})["lr"] == 0.0
    assert hyperparams.for_task("cnn", "smoke", {"lr": 1, "train_samples": None})["lr"] == 1


def test_the_transformers_heads_must_divide_its_width():
    assert hyperparams.for_task("transformer", "smoke", {"heads": 8})["heads"] == 8
    with pytest.raises(ValueError, match=r"^hyperparameter heads=5 for task transformer: must divide model_dim=128$"):
        hyperparams.for_task("transformer", "smoke", {"heads": 5})
