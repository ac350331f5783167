"""A run whose training goes NaN or inf fails at once, naming where and what to change: never a
trial's value, never a study's best (issue #55)."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
import torch

from hpo.errors import TrainingDiverged
from hpo.fixtures import write_sample
from hpo.train.config import TrainConfig
from hpo.train.finite import LossWatch, check_scores, what_to_change
from hpo.train.loop import train
from tests.support.damaged_encoders import nan_encoder
from tests.support.shared_storage import read_study
from tests.support.tune_cli import run_tune, tune_assets

CPU, CUDA = torch.device("cpu"), torch.device("cuda")  # the watch's policy only: no GPU needed
NAN, INF = float("nan"), float("inf")


def _steps(watch: LossWatch, losses: list[float], epoch: int = 1) -> None:
    for step, loss in enumerate(losses, start=1):
        watch.step(epoch, step, torch.tensor(loss))


def test_a_non_finite_loss_fails_the_run_at_its_step_on_a_cpu():
    watch = LossWatch(CPU, "lower learning_rate (now 1e+30)")
    _steps(watch, [0.7, 0.6])  # finite: nothing happens
    with pytest.raises(TrainingDiverged) as caught:
        _steps(watch, [0.5, 0.4, NAN, 0.3], epoch=2)
    assert str(caught.value) == "loss became NaN at epoch 2 step 3; lower learning_rate (now 1e+30)"


def test_on_a_gpu_losses_are_read_together_and_still_name_the_first_bad_step():
    """No device wait per step: the losses wait until a check (an evaluation, CHECK_SECONDS)."""
    watch = LossWatch(CUDA, "lower learning_rate")
    _steps(watch, [0.7, 0.6, INF, NAN, 0.5])  # unread yet: no wait for the device
    assert len(watch.pending) == 5
    with pytest.raises(TrainingDiverged, match="^loss became inf at epoch 1 step 3; lower"):
        watch.check()


def test_a_loss_not_finite_before_any_update_blames_the_checkpoint_not_the_learning_rate():
    watch = LossWatch(CPU, "lower learning_rate")
    with pytest.raises(TrainingDiverged) as caught:
        _steps(watch, [NAN])
    assert "epoch 1 step 1, before any update; check the encoder checkpoint" in str(caught.value)
    assert "learning_rate" not in str(caught.value)


def test_non_finite_validation_probabilities_fail_the_run():
    """A last step can turn the weights to NaN with its own loss still finite."""
    check_scores(np.full((4, 9), 0.5), "after epoch 1", "lower learning_rate")
    check_scores(None, "after epoch 1", "lower learning_rate")  # no probabilities: nothing to judge
    probs = np.full((4, 9), 0.5)
    probs[2, 3] = NAN
    with pytest.raises(TrainingDiverged, match="^validation probabilities became NaN after epoch"):
        check_scores(probs, "after epoch 1", "lower learning_rate")


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory):
    return write_sample(tmp_path_factory.mktemp("sample"), posts=60, seed=3)


def _diverging(encoder, data_dir, checkpoint_dir, **settings) -> TrainConfig:
    """A config whose training diverges: learning_rate 1e30, which the spec now refuses. Set
    past validation, since the loop must catch a diverging run whatever let it through."""
    config = TrainConfig(
        task="criteria",
        encoder=str(encoder),
        data_dir=str(data_dir),
        epochs=1,
        batch_size=16,
        max_length=64,
        mixed_precision="no",
        checkpoint_dir=str(checkpoint_dir),
        **settings,
    )
    object.__setattr__(config, "learning_rate", 1e30)
    return config


@pytest.mark.parametrize(
    "settings",
    [
        {"criteria_formulation": "multilabel"},
        {"criteria_formulation": "whole_post", "evidence_loss_weight": 1.0},
    ],
    ids=["multilabel", "whole_post"],
)
def test_a_diverging_run_fails_at_once_and_saves_nothing(
    tiny_roberta, sample_dir, tmp_path, settings
):
    """It used to end "macro_f1 0.4757 ... loss nan" with every encoder tensor NaN, and save it."""
    config = _diverging(tiny_roberta, sample_dir, tmp_path / "checkpoint", **settings)
    with pytest.raises(TrainingDiverged) as caught:
        train(config)
    message = str(caught.value)
    assert message.startswith("loss became NaN at epoch 1 step "), message
    assert message.endswith("; " + what_to_change(config)) and "\n" not in message
    assert "lower learning_rate (now 1e+30)" in message
    assert not (tmp_path / "checkpoint").exists()


def test_the_fix_names_the_settings_that_diverge(tiny_roberta, sample_dir):
    config = TrainConfig(
        task="criteria",
        encoder=str(tiny_roberta),
        data_dir=str(sample_dir),
        criteria_formulation="whole_post",
        evidence_loss_weight=2.0,
        hard_negative_weight=0.5,
        head_learning_rate=1e-3,
        mixed_precision="fp16",
    )
    assert what_to_change(config) == (
        "lower learning_rate (now 3e-05) or head_learning_rate (now 0.001) or "
        "evidence_loss_weight (now 2) or hard_negative_weight (now 0.5), or train with "
        "mixed_precision bf16 or no"
    )


@pytest.mark.slow
def test_hpo_tune_fails_a_trial_whose_loss_goes_nan_and_never_makes_it_the_best(
    tmp_path, tiny_roberta, tiny_deberta, sqlite_url, study_name
):
    """``hpo tune`` as a user runs it: the trials on the NaN encoder end FAIL with the reason in
    fail_reason, the healthy ones finish, and the study's best is a healthy one."""
    assets = tune_assets(
        tmp_path, tiny_roberta, nan_encoder(tiny_deberta, tmp_path / "nan-deberta"), posts=60
    )
    run = run_tune(
        "criteria-smoke.yaml",
        study_name,
        sqlite_url,
        assets,
        1,
        *("--set", "n_trials=4", "--set", "train.epochs=1", "--set", "keep_top_k=1"),
    )
    study = read_study(study_name, sqlite_url)
    trials = study.get_trials()
    shown = [(t.number, t.state.name, t.params.get("encoder"), t.user_attrs) for t in trials]
    on_nan = [t for t in trials if t.params.get("encoder") == "tiny-deberta"]
    healthy = [t for t in trials if t.params.get("encoder") == "tiny-roberta"]
    assert on_nan and healthy, shown  # the sampler's seed tries both encoders
    for trial in on_nan:
        assert trial.state == optuna.trial.TrialState.FAIL, shown
        assert trial.user_attrs["fail_reason"].startswith(
            "TrainingDiverged: loss became NaN at epoch 1 step 1, before any update"
        ), shown
    assert {t.state.name for t in healthy} <= {"COMPLETE", "PRUNED"}, shown  # pruned: a rung
    assert study.best_trial.params["encoder"] == "tiny-roberta", shown
    assert "TrainingDiverged: loss became NaN" in run.stdout + run.stderr
