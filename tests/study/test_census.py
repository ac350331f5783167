"""How a study's trials ended, on real SQLite and PostgreSQL: a trial interrupted and queued
again counts as re-queued, not failed; a surplus one as neither; failures group by reason."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from hpo.study.records import (
    SURPLUS,
    TrialCounts,
    fail_running,
    find_trial,
    requeue,
    state_counts,
    trial_outcomes,
)
from hpo.study.records._census import _set_aside
from hpo.study.storage import get_storage

X = {"x": FloatDistribution(0.0, 1.0)}


def _failed(study: optuna.Study, reason: str) -> None:
    trial = study.ask(X)
    trial.set_user_attr("fail_reason", reason)
    study.tell(trial, state=TrialState.FAIL)


def _interrupted(study: optuna.Study, max_retry: int = 3) -> int:
    """A running trial failed as the worker's Ctrl-C fails it, and queued again."""
    number = study.ask(X).number
    fail_running(study, find_trial(study, number), "interrupted (Ctrl-C)")
    requeue(study, find_trial(study, number), max_retry)
    return number


@pytest.fixture
def study(storage_url, study_name) -> optuna.Study:
    study = optuna.create_study(
        study_name=study_name, storage=get_storage(storage_url), direction="maximize"
    )
    study.tell(study.ask(X), 0.7)
    study.tell(study.ask(X), state=TrialState.PRUNED)
    _failed(study, "ValueError: bad data\nTraceback …")
    _failed(study, "ValueError: bad data")
    _failed(study, "RuntimeError: out of memory")
    _failed(study, f"{SURPLUS} the study already has 6 trials")
    first = _interrupted(study)
    # the re-queued copy runs and is interrupted too: two re-queued trials, one waiting copy
    copy = study.ask()
    assert copy.params == find_trial(study, first).params
    study.ask(X)  # left running (asked now: an ask takes a waiting copy first)
    fail_running(study, find_trial(study, copy.number), "interrupted (Ctrl-C)")
    requeue(study, find_trial(study, copy.number), 3)
    return study


def test_interrupted_trials_count_as_requeued_and_surplus_ones_not_at_all(study):
    assert state_counts(study) == TrialCounts(
        complete=1,
        pruned=1,
        failed=3,
        requeued=2,
        running=1,
        waiting=1,
        best=pytest.approx(0.7),
    )


def test_the_grpc_proxys_count_agrees_with_the_sql_one(study):
    """Behind the gRPC proxy there is no SQL: the count comes from the trials themselves."""
    counts = state_counts(study)
    assert _set_aside(study) == (counts.requeued, 1)


def test_outcomes_group_failures_by_their_first_line_most_frequent_first(study):
    outcomes = trial_outcomes(study)
    assert outcomes.counts == TrialCounts(
        complete=1, pruned=1, failed=3, requeued=2, running=1, waiting=1
    )
    assert outcomes.failures == [
        ("ValueError: bad data", 2),
        ("RuntimeError: out of memory", 1),
    ]


def test_a_trial_past_its_retries_is_a_failure(storage_url, study_name):
    study = optuna.create_study(study_name=study_name, storage=get_storage(storage_url))
    _interrupted(study, max_retry=0)  # no copy queued: nothing will run it again
    counts = state_counts(study)
    assert (counts.failed, counts.requeued) == (1, 0)
    assert trial_outcomes(study).failures == [("interrupted (Ctrl-C)", 1)]


@pytest.mark.slow
def test_hpo_status_shows_requeued_trials_apart_from_failed_ones(study, storage_url, capsys):
    from hpo.cli import main

    assert main(["status", study.study_name, "--storage", storage_url]) == 0
    states = capsys.readouterr().out.splitlines()[1].split()
    assert states == [
        "complete=1",
        "pruned=1",
        "failed=3",
        "re-queued=2",
        "running=1",
        "waiting=1",
    ]
    assert main(["status", "--storage", storage_url]) == 0  # the storage's studies, listed
    (listed,) = [line for line in capsys.readouterr().out.splitlines() if study.study_name in line]
    assert "failed=3  re-queued=2  running=1" in listed
