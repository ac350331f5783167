"""A finished trial's line: one line, its state, value, epochs and time, and only a few of the
parameters its study searches, however many that is."""

from __future__ import annotations

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from hpo.run.trial_line import (
    MAX_SHOWN,
    TrialLog,
    compact_params,
    duration,
    progress_words,
    searched_names,
    trial_line,
)
from hpo.spec import load_spec
from tests.support import REPO

STUDIES = REPO / "studies"


def _spec(name: str, *overrides: str):
    return load_spec(STUDIES / name, list(overrides), "sqlite:///unused.db", env={})


def test_a_29_parameter_trial_is_one_short_line_headed_by_what_matters_most():
    spec = _spec("criteria-supermax.yaml")
    names = searched_names(spec)
    assert len(spec.search_space) == len(names) == 29  # every one of them varies
    params = {name: 0.1234567 for name in names} | {
        "encoder": "microsoft/deberta-v3-base",
        "adapter": "full",
        "learning_rate": 3.2e-05,
        "batch_size": 16,
        "epochs": 4,
    }
    line = trial_line(
        12,
        "COMPLETE",
        metric="macro_f1",
        value=0.551249,
        epochs=3,
        seconds=2112.4,
        params=compact_params(params, names),
    )
    assert "\n" not in line and len(line) < 160, line
    assert line.startswith(
        "trial 12 COMPLETE macro_f1=0.5512, 3 epochs, 35m12s: encoder=deberta-v3-base "
        "adapter=full lr=3.2e-05 bs=16 epochs=4 "
    )
    assert line.endswith(f" +{29 - MAX_SHOWN} more"), line
    assert line.count("=") == 1 + MAX_SHOWN


def test_only_the_parameters_the_space_varies_are_shown():
    """A categorical with one choice is no search: every trial has the same value."""
    spec = _spec("criteria-smoke.yaml", "search_space.encoder.choices=[tiny-roberta]")
    names = searched_names(spec)
    assert "encoder" not in names and names[0] == "learning_rate"
    params = {"encoder": "tiny-roberta", "learning_rate": 0.0032, "pooling": "mean"}
    assert compact_params(params, names) == "lr=0.0032 pooling=mean"  # not sampled: skipped


def test_one_parameter_past_the_limit_is_shown_rather_than_counted():
    names = [f"p{i}" for i in range(MAX_SHOWN + 2)]
    params = dict.fromkeys(names, 1)
    assert compact_params(params, names[:-1]).split()[-1] == f"p{MAX_SHOWN}=1"
    assert compact_params(params, names).endswith(f" p{MAX_SHOWN - 1}=1 +2 more")


def test_a_failed_trial_names_its_reason_on_the_same_line_and_a_pruned_one_no_value():
    failed = trial_line(
        4,
        "FAIL",
        metric="macro_f1",
        value=None,
        epochs=None,
        seconds=None,
        params="lr=0.001",
        reason="RuntimeError: CUDA out of memory\nTraceback (most recent call last): …",
    )
    assert failed == "trial 4 FAIL: lr=0.001; reason: RuntimeError: CUDA out of memory"
    pruned = trial_line(
        5, "PRUNED", metric="ap", value=None, epochs=1, seconds=4.25, params="bs=16"
    )
    assert pruned == "trial 5 PRUNED, 1 epoch, 4.2s: bs=16"


def test_a_value_with_its_validation_interval_shows_it_beside_the_value():
    interval = {"low": 0.41, "high": 0.66, "level": 0.95, "posts": 149}
    line = trial_line(
        8,
        "COMPLETE",
        metric="post_macro_f1",
        value=0.5384,
        epochs=4,
        seconds=2015,
        params="lr=3e-05",
        interval=interval,
    )
    assert line == (
        "trial 8 COMPLETE post_macro_f1=0.5384 (95% CI 0.4100-0.6600), 4 epochs, 33m35s: lr=3e-05"
    )
    pruned = trial_line(
        9,
        "PRUNED",
        metric="post_macro_f1",
        value=None,
        epochs=2,
        seconds=9.0,
        params="",
        interval=interval,
    )
    assert "CI" not in pruned  # no value, nothing to bound


def test_a_trial_the_time_budget_stopped_says_so_beside_its_epochs():
    line = trial_line(
        14,
        "COMPLETE",
        metric="macro_f1",
        value=0.31,
        epochs=2,
        seconds=310,
        params="epochs=6",
        budget_ended=True,
    )
    assert (
        line
        == "trial 14 COMPLETE macro_f1=0.3100, 2 epochs, ended by the time budget, 5m10s: epochs=6"
    )


def test_a_pruned_trial_says_where_it_was_judged_and_by_what(caplog):
    """Optuna keeps a pruned trial's last report as its value: the signal the pruner judged
    (``prune_on``, not the study's metric, where the spec sets one), at a step that may fall
    inside an epoch."""
    trial_log = TrialLog("post_macro_f1", ["learning_rate"], "average_precision", 9)
    pruned = optuna.trial.create_trial(
        state=TrialState.PRUNED,
        value=0.41,
        intermediate_values={1: 0.38, 3: 0.41},
        params={"learning_rate": 1e-3},
        distributions={"learning_rate": FloatDistribution(1e-5, 1e-2, log=True)},
        user_attrs={"epochs_run": 0, "wall_seconds": 2.0},
    )
    study = optuna.create_study(direction="maximize")
    study.add_trial(pruned)
    assert (
        trial_log(study.trials[0])
        == "trial 0 PRUNED average_precision=0.4100 at 3/9 of an epoch, 2.0s: lr=0.001"
    )
    assert [progress_words(step, 3) for step in (2, 3, 6, 7)] == [
        "2/3 of an epoch",
        "epoch 1",
        "epoch 2",
        "2.33 epochs",
    ]


def test_durations_read_as_a_person_says_them():
    assert [duration(s) for s in (3.04, 59.9, 61, 2112.4, 7500)] == [
        "3.0s",
        "59.9s",
        "1m01s",
        "35m12s",
        "2h05m",
    ]
