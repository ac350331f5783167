"""Screening at a low fidelity (spec ``fidelity``): the check that earns it, its fall-back, ASHA's
promotions, and what the study shows of it, on real Optuna storages (SQLite and PostgreSQL)."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from hpo.attributes import (
    CHECKED_ATTR,
    FIDELITY_CHECK_ATTR,
    PROMOTED_FROM_ATTR,
    STOPPED_BY_ATTR,
    TRAIN_SHARE_ATTR,
    TWIN_OF_ATTR,
)
from hpo.fixtures import write_sample
from hpo.spec import FidelitySpec, SpecError, StudySpec, load_spec
from hpo.study import open_study, study_status
from hpo.study.records import best_full_trial, completed_trials, screened_trials
from hpo.study.records._notes import study_note
from hpo.study.search import is_unprunable, promote, start_fidelity
from hpo.study.search._fidelity import fidelity_check
from tests.support import REPO

SMOKE = REPO / "studies" / "criteria-smoke.yaml"
LR = {"learning_rate": FloatDistribution(1e-3, 6e-3, log=True)}


def _spec(tmp_path: Path, storage: str, name: str, *more: str) -> StudySpec:
    return load_spec(
        SMOKE,
        [
            f"name={name}",
            f"data_dir={write_sample(tmp_path / 'data', posts=30, seed=0, force=True)}",
            f"output_dir={tmp_path / 'out'}",
            "n_trials=40",
            "fidelity.train_share=0.25",
            "fidelity.check=3",
            *more,
        ],
        storage,
        env={},
    )


def _trial(lr: float, value: float | None, state=TrialState.COMPLETE, **attrs):
    return create_trial(
        params={"learning_rate": lr},
        distributions=LR,
        value=value,
        state=state,
        user_attrs=attrs,
    )


def _pairs(lows: list[float], fulls: list[float]) -> list:
    """Check configurations that finished at both fidelities: (full run, its low twin)."""
    trials = []
    for i, (low, full) in enumerate(zip(lows, fulls, strict=True)):
        lr = 1e-3 * (1 + i)
        trials.append(_trial(lr, full, **{CHECKED_ATTR: True}))
        trials.append(_trial(lr, low, **{TRAIN_SHARE_ATTR: 0.25, TWIN_OF_ATTR: 2 * i}))
    return _numbered(trials)


def _numbered(trials: list) -> list:
    """Numbered in order, as a study numbers the trials it is given."""
    for number, trial in enumerate(trials):
        trial.number = number
    return trials


FIDELITY = FidelitySpec(train_share=0.25, check=3, min_rank_correlation=0.6)


def test_the_check_screens_once_its_configurations_rank_alike():
    check = fidelity_check(_pairs([0.30, 0.40, 0.50], [0.50, 0.60, 0.70]), FIDELITY)
    assert (check.phase, check.rank_correlation, len(check.pairs)) == ("screening", 1.0, 3)


def test_a_fidelity_that_ranks_badly_leaves_full_trials_only():
    reversed_ranks = fidelity_check(_pairs([0.5, 0.4, 0.3], [0.5, 0.6, 0.7]), FIDELITY)
    assert (reversed_ranks.phase, reversed_ranks.rank_correlation) == ("full", -1.0)
    # scoring every configuration alike ranks nothing: NaN, never a pass
    alike = fidelity_check(_pairs([0.0, 0.0, 0.0], [0.5, 0.6, 0.7]), FIDELITY)
    assert alike.phase == "full" and math.isnan(alike.rank_correlation)


def test_the_check_waits_for_every_live_configuration():
    trials = _pairs([0.3, 0.4], [0.5, 0.6])
    assert fidelity_check(trials, FIDELITY).phase == "checking"  # two of three
    running = [*trials, _trial(5e-3, None, TrialState.RUNNING, **{CHECKED_ATTR: True})]
    running.append(
        _trial(5e-3, None, TrialState.WAITING, **{TRAIN_SHARE_ATTR: 0.25, TWIN_OF_ATTR: 4})
    )
    check = fidelity_check(_numbered(running), FIDELITY)
    assert (check.phase, check.live, len(check.pairs)) == ("checking", 3, 2)


def test_a_check_run_that_can_no_longer_finish_is_not_waited_for_nor_paired():
    trials = _pairs([0.3, 0.4, 0.5], [0.5, 0.6, 0.7])
    # a fourth check whose low twin failed with no retry left: dead, so the three decide
    trials.append(_trial(5e-3, 0.9, **{CHECKED_ATTR: True}))
    trials.append(_trial(5e-3, None, TrialState.FAIL, **{TRAIN_SHARE_ATTR: 0.25, TWIN_OF_ATTR: 6}))
    check = fidelity_check(_numbered(trials), FIDELITY)
    assert (check.phase, check.live, len(check.pairs)) == ("screening", 3, 3)
    # a full run the time budget cut short is no full run: its configuration is no pair
    cut = _pairs([0.3, 0.4, 0.5], [0.5, 0.6, 0.7])
    cut[0].user_attrs[STOPPED_BY_ATTR] = "the study's time budget, after epoch 1"
    assert fidelity_check(cut, FIDELITY).phase == "checking"


def _study(spec: StudySpec) -> optuna.Study:
    return open_study(spec, note=False)


def test_a_check_trial_queues_its_low_fidelity_twin(tmp_path, storage_url, study_name):
    spec = _spec(tmp_path, storage_url, study_name)
    study = _study(spec)
    trial = study.ask({"learning_rate": FloatDistribution(1e-3, 6e-3, log=True)})
    assert start_fidelity(trial, spec) == 1.0
    assert trial.user_attrs[CHECKED_ATTR] is True
    (twin,) = study.get_trials(states=(TrialState.WAITING,))
    assert twin.user_attrs == {TRAIN_SHARE_ATTR: 0.25, TWIN_OF_ATTR: trial.number}
    asked = study.ask()  # the queued twin, with the same parameters, runs at the low fidelity
    assert asked.number == twin.number
    assert (
        asked.suggest_float("learning_rate", 1e-3, 6e-3, log=True) == trial.params["learning_rate"]
    )
    assert start_fidelity(asked, spec) == 0.25
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 0  # a twin has no twin


def _checked_study(tmp_path, storage_url, study_name, lows, fulls, *more) -> tuple:
    spec = _spec(tmp_path, storage_url, study_name, *more)
    study = _study(spec)
    for frozen in _pairs(lows, fulls):
        study.add_trial(frozen)
    return spec, study


def test_a_proven_fidelity_screens_and_promotes_the_best(tmp_path, storage_url, study_name):
    spec, study = _checked_study(
        tmp_path, storage_url, study_name, [0.3, 0.4, 0.5], [0.5, 0.6, 0.7], "fidelity.promote=0.5"
    )
    screened = []
    for _ in range(3):
        trial = study.ask({"learning_rate": FloatDistribution(1e-3, 6e-3, log=True)})
        assert start_fidelity(trial, spec) == 0.25
        assert trial.user_attrs[TRAIN_SHARE_ATTR] == 0.25 and CHECKED_ATTR not in trial.user_attrs
        screened.append(trial)
    assert study.user_attrs[FIDELITY_CHECK_ATTR] == {
        "phase": "screening",
        "pairs": 3,
        "rank_correlation": 1.0,
        "min_rank_correlation": 0.6,
        "train_share": 0.25,
    }
    # 0.45 among 0.3, 0.4, 0.5 (the checks, whose full runs exist): top half is 0.5 and 0.45
    assert promote(screened[0], spec, 0.45) == [screened[0].number]
    study.tell(screened[0], 0.45)
    (queued,) = study.get_trials(states=(TrialState.WAITING,))
    assert queued.user_attrs == {PROMOTED_FROM_ATTR: screened[0].number}
    assert promote(screened[1], spec, 0.1) == []  # at the bottom: not promoted
    study.tell(screened[1], 0.1)
    # a promoted configuration is not queued twice; ASHA: an earlier one enters the top later
    assert promote(screened[2], spec, 0.05) == []
    asked = study.ask()  # the promoted configuration, as a full run
    assert asked.number == queued.number and start_fidelity(asked, spec) == 1.0
    assert (
        asked.suggest_float("learning_rate", 1e-3, 6e-3, log=True)
        == screened[0].params["learning_rate"]
    )
    assert TRAIN_SHARE_ATTR not in asked.user_attrs
    # its configuration earned the full run by a complete one: no look inside it prunes it
    assert is_unprunable(asked) and is_unprunable(screened[2])


def test_a_fidelity_that_ranks_badly_runs_every_later_trial_in_full(
    tmp_path, storage_url, study_name
):
    spec, study = _checked_study(
        tmp_path, storage_url, study_name, [0.5, 0.4, 0.3], [0.5, 0.6, 0.7]
    )
    trial = study.ask({"learning_rate": FloatDistribution(1e-3, 6e-3, log=True)})
    assert start_fidelity(trial, spec) == 1.0
    assert not {TRAIN_SHARE_ATTR, CHECKED_ATTR} & set(trial.user_attrs)
    assert not is_unprunable(trial), "a sampled full run is pruned as without the section"
    assert study.get_trials(states=(TrialState.WAITING,)) == []
    assert study.user_attrs[FIDELITY_CHECK_ATTR]["phase"] == "full"
    status = study_status(study).fidelity
    assert status.startswith("full trials only") and "rank correlation -1.00 over 3" in status
    note = study_note(spec, study.user_attrs)
    assert "every trial since is a full run" in note and "-1.00 over 3 configurations" in note


def test_a_study_resumed_with_another_share_proves_it_afresh(tmp_path, storage_url, study_name):
    """The check proved 25% of the posts; the spec now says 50%: nothing has ranked that yet,
    so the next configuration is a check again, its twin at the new share."""
    assert fidelity_check(_pairs([0.3, 0.4, 0.5], [0.5, 0.6, 0.7]), FIDELITY).phase == "screening"
    half = FidelitySpec(train_share=0.5, check=3, min_rank_correlation=0.6)
    check = fidelity_check(_pairs([0.3, 0.4, 0.5], [0.5, 0.6, 0.7]), half)
    assert (check.phase, check.pairs, check.live) == ("checking", (), 0)
    spec, study = _checked_study(
        tmp_path,
        storage_url,
        study_name,
        [0.3, 0.4, 0.5],
        [0.5, 0.6, 0.7],
        "fidelity.train_share=0.5",
    )
    trial = study.ask({"learning_rate": FloatDistribution(1e-3, 6e-3, log=True)})
    assert start_fidelity(trial, spec) == 1.0 and trial.user_attrs[CHECKED_ATTR] is True
    (twin,) = study.get_trials(states=(TrialState.WAITING,))
    assert twin.user_attrs == {TRAIN_SHARE_ATTR: 0.5, TWIN_OF_ATTR: trial.number}


def test_low_fidelity_runs_never_judge_the_study(tmp_path, sqlite_url, study_name):
    spec, study = _checked_study(tmp_path, sqlite_url, study_name, [0.3, 0.4, 0.5], [0.5, 0.6, 0.7])
    study.add_trial(_trial(5.5e-3, 0.99, **{TRAIN_SHARE_ATTR: 0.25}))  # above every full run
    assert best_full_trial(study).value == 0.7
    assert study.best_value == 0.99  # Optuna's own would have taken the screening run
    assert all(TRAIN_SHARE_ATTR not in t.user_attrs for t in completed_trials(study))
    assert len(screened_trials(study)) == 4
    assert study_status(study).counts.best == 0.7


def test_a_spec_sets_the_share_only_in_its_fidelity_section(tmp_path, sqlite_url):
    with pytest.raises(SpecError, match="train.train_share.*fidelity.train_share"):
        _spec(tmp_path, sqlite_url, "x", "train.train_share=0.5")
    with pytest.raises(SpecError, match="fidelity.train_share"):
        _spec(tmp_path, sqlite_url, "x", "fidelity.train_share=1")
    with pytest.raises(SpecError, match="fidelity.check"):
        _spec(tmp_path, sqlite_url, "x", "fidelity.check=2")
    with pytest.raises(SpecError, match=r"fidelity.check: 3 .* take 6 of n_trials 6, leaving none"):
        _spec(tmp_path, sqlite_url, "x", "n_trials=6")
    assert _spec(tmp_path, sqlite_url, "x", "n_trials=7").fidelity.check == 3
    assert load_spec(SMOKE, ["data_dir=."], sqlite_url, env={}).fidelity is None
