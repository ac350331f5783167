"""Optuna's heartbeat contract, kept by hpo's storages on SQLite and PostgreSQL.

Ported from Optuna's tests/storages_tests/test_heartbeat.py (v5.0.0-rc1): any caller —
Optuna's ``fail_stale_trials``, ``study.optimize``, a dashboard, a second study in the same
process — gets the database's answer every time it asks. When to ask is the worker's
business (tests/run/test_worker.py), never the storage's. That the Optuna internals behind it are
still there is tests/study/test_optuna_private.py's.
"""

from __future__ import annotations

import threading
import time

import optuna
import pytest
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from hpo.spec import HeartbeatSpec
from hpo.study.storage import fail_stale, get_storage

INTERVAL, GRACE = 1, 2
PAST_GRACE = GRACE + 1.2  # over a second past it: SQLite's clock counts whole seconds


def heartbeat_storage(url: str, max_retry: int = 0):
    return get_storage(
        url, HeartbeatSpec(interval=INTERVAL, grace_period=GRACE, max_retry=max_retry)
    )


def a_stale_trial(url: str, study_name: str):
    """A study whose one trial (x sampled) beat once and then went silent past the grace."""
    storage = heartbeat_storage(url, max_retry=1)
    study = optuna.create_study(study_name=study_name, storage=storage)
    dead = study.ask()
    dead.suggest_float("x", 0.0, 1.0)
    storage.record_heartbeat(dead._trial_id)
    time.sleep(PAST_GRACE)
    return storage, study, dead


@pytest.mark.slow
def test_stale_trial_ids_are_the_same_however_often_asked(storage_url, study_name):
    """Optuna's test_get_stale_trial_ids: asked twice in a row, the answer is the same."""
    storage = heartbeat_storage(storage_url)
    study = optuna.create_study(study_name=study_name, storage=storage)
    trial = study.ask()
    storage.record_heartbeat(trial._trial_id)
    time.sleep(PAST_GRACE)
    assert storage._get_stale_trial_ids(study._study_id) == [trial._trial_id]
    assert storage._get_stale_trial_ids(study._study_id) == [trial._trial_id], (
        "asked again at once: same answer"
    )


@pytest.mark.slow
def test_fail_stale_trials_spares_unbeaten_and_fresh_trials_and_fails_silent_ones(
    storage_url, study_name
):
    """Optuna's test_fail_stale_trials: a trial never beaten is not judged; one beaten
    within the grace period stays RUNNING; once its beat is older it is failed."""
    storage = heartbeat_storage(storage_url)
    study = optuna.create_study(study_name=study_name, storage=storage)
    trial = study.ask()
    time.sleep(PAST_GRACE)
    optuna.storages.fail_stale_trials(study)
    assert study.trials[0].state == TrialState.RUNNING, "never beaten: not judged"
    storage.record_heartbeat(trial._trial_id)
    optuna.storages.fail_stale_trials(study)
    assert study.trials[0].state == TrialState.RUNNING, "beaten just now"
    time.sleep(PAST_GRACE)
    optuna.storages.fail_stale_trials(study)
    assert study.trials[0].state == TrialState.FAIL


@pytest.mark.slow
def test_optimize_fails_this_studys_stale_trial_only(storage_url, study_name):
    """Optuna's test_fail_stale_trials_with_optimize: optimize on one study fails its own
    stale trial before running, and leaves another study's alone."""
    storage = heartbeat_storage(storage_url)
    mine = optuna.create_study(study_name=study_name, storage=storage)
    other = optuna.create_study(study_name=f"{study_name}-other", storage=storage)
    for study in (mine, other):
        storage.record_heartbeat(study.ask()._trial_id)
    time.sleep(PAST_GRACE)
    mine.optimize(lambda trial: 1.0, n_trials=1)
    assert mine.trials[0].state == TrialState.FAIL
    assert other.trials[0].state == TrialState.RUNNING


@pytest.mark.slow
def test_the_stale_callback_requeues_with_the_same_parameters_up_to_max_retry(
    storage_url, study_name
):
    """Optuna's test_retry_failed_trial_callback and ..._repetitive_failure: each failed
    stale trial is queued again with its parameters and attributes, at most max_retry times."""
    storage = heartbeat_storage(storage_url, max_retry=1)
    assert isinstance(
        storage.get_heartbeat_stale_trial_callback(), RetryHeartbeatStaleTrialCallback
    )
    study = optuna.create_study(study_name=study_name, storage=storage)
    trial = study.ask()
    trial.suggest_float("x", 0.0, 1.0)
    trial.set_user_attr("worker", "w0")
    for _ in range(2):  # the original dies, then its retry dies too
        storage.record_heartbeat(trial._trial_id)
        time.sleep(PAST_GRACE)
        optuna.storages.fail_stale_trials(study)
        trial = study.ask()  # the retry when one is queued, else a fresh trial
    trials = study.trials
    retried = [RetryHeartbeatStaleTrialCallback.retried_trial_number(t) for t in trials]
    assert trials[0].state == TrialState.FAIL
    assert retried[1] == 0 and trials[1].state == TrialState.FAIL, (
        "re-queued once, and that copy died too"
    )
    assert trials[1].params == trials[0].params and trials[1].user_attrs["worker"] == "w0"
    assert retried[2] is None, "max_retry=1 reached: the copy's death is not re-queued"


def test_a_trial_that_never_beat_is_failed_a_grace_period_after_hpo_first_sees_it(
    storage_url, study_name
):
    """A database outage can cut ``study.ask`` after it created the trial, before its worker
    knew the trial: nobody beats it. Optuna never judges an unbeaten trial, so the study
    waited for it forever; hpo's sweep gives it a beat when first seen, then fails it."""
    storage = heartbeat_storage(storage_url, max_retry=1)
    study = optuna.create_study(study_name=study_name, storage=storage)
    orphan = study.ask()  # as the worker that lost it left it: RUNNING, never beaten
    assert fail_stale(study) == [], "first seen now: its grace period starts"
    time.sleep(PAST_GRACE)
    assert [t.number for t in fail_stale(study)] == [orphan.number]
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.WAITING]


@pytest.mark.slow
def test_hpo_fail_stale_records_why_and_requeues(storage_url, study_name):
    """A trial failed as stale says why (fail_reason), and its retry starts without it."""
    storage, study, dead = a_stale_trial(storage_url, study_name)
    failed = fail_stale(study)
    assert [t.number for t in failed] == [dead.number]
    trials = study.trials
    assert trials[0].state == TrialState.FAIL
    assert trials[0].user_attrs["fail_reason"].startswith(f"no heartbeat for over {GRACE}s")
    assert trials[1].state == TrialState.WAITING and trials[1].params == trials[0].params
    assert "fail_reason" not in trials[1].user_attrs, "the retry has not failed"
    assert fail_stale(study) == [], "nothing left to fail"


@pytest.mark.slow
def test_stale_trials_names_the_silent_running_trials_and_changes_nothing(storage_url, study_name):
    """What `hpo status` calls stale (issue #48 item 11): a RUNNING trial whose beat is older
    than the grace period, with the seconds since, and one that never beat, started longer ago
    (a database failing inside `study.ask` leaves it: no worker knows it). A fresh one, beaten or
    just started, is not; reading them fails or re-queues nothing (the sweep does that)."""
    from hpo.study.storage._heartbeat import stale_trials

    storage = get_storage(storage_url)  # as `hpo status` opens a study: no heartbeat settings
    study = optuna.create_study(study_name=study_name, storage=storage)
    silent, fresh, orphan = study.ask(), study.ask(), study.ask()
    heartbeat_storage(storage_url).record_heartbeat(silent._trial_id)
    time.sleep(PAST_GRACE)
    heartbeat_storage(storage_url).record_heartbeat(fresh._trial_id)
    just_started = study.ask()
    stale = stale_trials(study, GRACE)
    assert list(stale) == [silent.number, orphan.number], (stale, just_started.number)
    assert stale[silent.number] > GRACE and stale[orphan.number] > GRACE
    assert [t.state for t in study.trials] == [TrialState.RUNNING] * 4, "only read"


@pytest.mark.postgres
@pytest.mark.slow
def test_no_trial_starts_between_a_stale_trials_failure_and_its_retry(
    postgres_url, study_name, monkeypatch
):
    """The sweep fails a stale trial and queues its retry under the trial-start lock. A worker
    counting between the two saw room for a fresh trial; with the study one trial short of
    n_trials, that fresh trial took the retry's place and the retry stepped aside as surplus,
    its configuration dropped (CI, `hpo tune` resumed after a revoked privilege)."""
    from hpo.study.records import trial_start

    storage, study, dead = a_stale_trial(postgres_url, study_name)
    censuses = []

    def another_worker_counts() -> None:  # its own connections, as another process has
        other = optuna.load_study(study_name=study_name, storage=get_storage(postgres_url))
        with trial_start(other) as census:
            censuses.append(census)

    queue_retry = storage.heartbeat_stale_trial_callback
    counter = threading.Thread(target=another_worker_counts)

    def slow_retry(study, trial) -> None:
        counter.start()
        counter.join(timeout=1.5)  # it counts now, unless the lock holds it back
        queue_retry(study, trial)

    monkeypatch.setattr(storage, "heartbeat_stale_trial_callback", slow_retry)
    assert [t.number for t in fail_stale(study)] == [dead.number]
    counter.join(timeout=30)
    [census] = censuses
    assert census["fail"] == 1 and census["waiting"] == 1 and census["running"] == 0, (
        "the other worker counted between the failure and its retry: it saw room for a "
        f"fresh trial ({census})"
    )
