"""A study's ETA from its running trials' own ETAs and the trials left (hpo.study._timing)."""

from __future__ import annotations

import time

import optuna
import pytest
from optuna.distributions import FloatDistribution

from hpo.study._timing import finish_in, study_eta_seconds
from hpo.study.storage import get_storage

X = {"x": FloatDistribution(0.0, 1.0)}


def test_the_only_running_trial_with_none_left_is_the_studys_eta():
    """#36: the study said 26 s while its only running trial said 4 min."""
    assert finish_in([240.0], left=0, trial_seconds=30.0) == 240.0


def test_trials_left_go_to_the_first_worker_free():
    # two workers free at 60 s and 200 s; three trials of 100 s: 60->160, 160->260, 200->300
    assert finish_in([60.0, 200.0], left=3, trial_seconds=100.0) == 300.0
    # one worker: the trials left queue behind the running one
    assert finish_in([50.0], left=4, trial_seconds=100.0) == 450.0


def test_a_trial_just_started_counts_as_a_whole_trial():
    assert finish_in([None, 10.0], left=0, trial_seconds=120.0) == 120.0


def test_no_eta_without_a_running_trial_or_a_known_trial_length():
    assert finish_in([], left=5, trial_seconds=100.0) is None  # nothing moves the study
    assert finish_in([30.0], left=2, trial_seconds=None) is None
    assert finish_in([None], left=0, trial_seconds=None) is None
    assert finish_in([30.0], left=0, trial_seconds=None) == 30.0


def test_a_studys_eta_counts_down_from_when_its_trials_said_it(sqlite_url):
    study = optuna.create_study(study_name="eta", storage=get_storage(sqlite_url))
    for _ in range(2):  # two finished trials of ~0 s each
        study.tell(study.ask(X), 0.5)
    running = study.ask(X)
    running.set_user_attr("progress", {"eta_seconds": 600.0, "at": time.time() - 100})
    # 3 trials: none left to start, so the running one's 600 s, said 100 s ago
    assert study_eta_seconds(study, 3) == pytest.approx(500, abs=5)
    # 6 trials: three more of ~0 s each after it
    assert study_eta_seconds(study, 6) == pytest.approx(500, abs=5)
    assert study_eta_seconds(study, None) is None


def test_before_any_trial_finished_a_trial_lasts_as_the_running_ones_foresee(sqlite_url):
    study = optuna.create_study(study_name="eta", storage=get_storage(sqlite_url))
    running = study.ask(X)
    running.set_user_attr("progress", {"eta_seconds": 300.0, "at": time.time()})
    # one worker: its trial ends in 300 s, then one more as long as this one (~300 s)
    assert study_eta_seconds(study, 2) == pytest.approx(600, abs=10)
