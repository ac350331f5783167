"""Heartbeats: beating a running trial, and failing the trials whose beat stopped.

The storage only answers: a beat is written and the stale trials are read from the
database on every call, each in one statement on Optuna's own tables (Optuna's three ORM
round trips each cost 1.7 and 1.4 ms on this machine's PostgreSQL, these 0.7 and 0.6 ms:
bench P3). When to look for stale trials is the caller's decision: the worker looks once
per heartbeat interval (hpo/run/worker.py), a dashboard or Optuna's ``fail_stale_trials``
whenever it likes, and every one of them gets the database's answer.

Optuna's internals used here (its heartbeat, trial and user-attribute tables, and the
stale-trial question its ``fail_stale_trials`` asks) come through ``_optuna_private``.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import optuna
import sqlalchemy as sa
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.dialects import postgresql, sqlite

from hpo.attributes import FAIL_REASON_ATTR
from hpo.study.storage._db_errors import as_storage_error
from hpo.study.storage._optuna_private import (
    AnswersStaleTrialQuestion,
    TrialHeartbeatModel,
    TrialModel,
    TrialUserAttributeModel,
    quiet_heartbeat_reminder,
    study_id,
    study_storage,
    trial_id,
    uncached,
)
from hpo.study.storage._start_lock import trial_start_lock

log = logging.getLogger(__name__)

_INSERTS = {
    "postgresql": postgresql.insert,
    "sqlite": sqlite.insert,
}  # both write ON CONFLICT ... DO UPDATE

# The worker asks and tells itself and beats its trials with ``beating``: Optuna's reminder
# that heartbeats come with Study.optimize would otherwise be printed for every trial.
quiet_heartbeat_reminder()


class OneStatementHeartbeat(AnswersStaleTrialQuestion):
    """Mixed into RDBStorage: its beat and its stale-trial query, one statement each, and the
    answer to Optuna's own stale-trial question. A missed beat (the database restarting) is
    logged, and the next one retries: Optuna's heartbeat thread would die on it and the
    healthy trial would later be failed as stale."""

    engine: sa.Engine
    heartbeat_interval: int | None
    grace_period: int | None

    def record_heartbeat(self, trial_id: int) -> None:
        insert = _INSERTS[self.engine.dialect.name](TrialHeartbeatModel).values(
            trial_id=trial_id, heartbeat=sa.func.now()
        )
        beat = insert.on_conflict_do_update(
            index_elements=["trial_id"], set_={"heartbeat": sa.func.now()}
        )
        try:
            with self.engine.begin() as connection:
                connection.execute(beat)
        except sa.exc.SQLAlchemyError as exc:
            # any database error, a revoked privilege too (it killed this thread with a
            # traceback); IntegrityError: the study was deleted meanwhile
            log.warning(
                "heartbeat for trial id %d missed: %s",
                trial_id,
                str(getattr(exc, "orig", exc)).strip(),
            )

    def stale_trial_ids(self, study_id: int, adopt_unbeaten: bool = False) -> list[int]:
        """The study's RUNNING trials whose last beat is older than the grace period, judged
        on the database's clock, in one read.

        ``adopt_unbeaten`` (hpo's own sweep; Optuna's question keeps Optuna's answer) also
        gives each RUNNING trial that never beat a beat now, so it goes stale a grace period
        after this first sees it. A database outage can cut ``study.ask`` after it created the
        trial and before its worker learned the trial's number: no worker beats that trial,
        a stale query joined on the beats never names it, and the study could never end. A
        write only when there is such a trial; a worker about to beat it overwrites this one."""
        rows = _running_beats(self.engine, study_id)
        unbeaten = [trial_id for trial_id, _, silent, _ in rows if silent is None]
        if adopt_unbeaten and unbeaten:
            adopt = _INSERTS[self.engine.dialect.name](TrialHeartbeatModel).values(
                [{"trial_id": trial_id, "heartbeat": sa.func.now()} for trial_id in unbeaten]
            )
            with self.engine.begin() as connection:
                connection.execute(adopt.on_conflict_do_nothing(index_elements=["trial_id"]))
        grace = timedelta(seconds=_grace_seconds(self))
        return [
            trial_id for trial_id, _, silent, _ in rows if silent is not None and silent > grace
        ]


def _running_beats(
    engine: sa.Engine, study_id: int
) -> list[tuple[int, int, timedelta | None, timedelta | None]]:
    """(trial id, number, time since its last beat, time since it started) of each RUNNING
    trial of the study, by number, in one read; None for a trial that never beat. The
    database's clock against the beats, naive as Optuna compares them (PostgreSQL's now() has
    a zone); this host's against the start, which Optuna writes from the worker's clock."""
    trials, beats = TrialModel, TrialHeartbeatModel
    query = (
        sa.select(
            trials.trial_id,
            trials.number,
            beats.heartbeat,
            trials.__table__.c.datetime_start,
            sa.func.now(),
        )
        .outerjoin(beats, beats.trial_id == trials.trial_id)
        .where(trials.study_id == study_id, trials.state == TrialState.RUNNING)
        .order_by(trials.number)  # an outer join's rows come in no set order on PostgreSQL
    )
    with engine.connect() as connection:
        rows = connection.execute(query).all()
    return [
        (
            trial_id,
            number,
            None if beat is None else now.replace(tzinfo=None) - beat,
            None if start is None else _utc_now() - start,
        )
        for trial_id, number, beat, start, now in rows
    ]


def stale_trials(study: optuna.Study, grace_seconds: float) -> dict[int, float]:
    """The study's RUNNING trials whose last heartbeat is over ``grace_seconds`` old, as {number:
    seconds since it}: their worker died, hung or lost the database, and the next stale-trial
    sweep (``fail_stale``) fails and re-queues them. A trial that never beat counts from its
    start: a database failing inside ``study.ask`` leaves one that no worker knows (the sweep
    adopts it). Read only; none behind the gRPC proxy, whose host judges beats on its own
    clock."""
    backend = uncached(study_storage(study))
    if not isinstance(backend, RDBStorage):
        return {}
    with as_storage_error("the heartbeat read"):
        rows = _running_beats(backend.engine, study_id(study))
    silences = {number: beat if beat is not None else start for _, number, beat, start in rows}
    return {
        number: silence.total_seconds()
        for number, silence in silences.items()
        if silence is not None and silence.total_seconds() > grace_seconds
    }


def _utc_now() -> datetime:
    """Now as Optuna 5 writes a trial's start and end in its tables: naive UTC."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _grace_seconds(storage: OneStatementHeartbeat) -> float:
    return (
        2 * storage.heartbeat_interval if storage.grace_period is None else storage.grace_period
    )  # Optuna's default


def heartbeat_interval(storage: optuna.storages.BaseStorage) -> int | None:
    """Seconds between a running trial's beats; None for a storage without heartbeats."""
    interval = getattr(storage, "get_heartbeat_interval", None)
    return interval() if interval else None


def first_heartbeat(trial: optuna.Trial) -> None:
    """Beat a trial the moment it exists: a worker that dies before ``beating`` starts
    leaves a trial that this beat lets other workers fail and re-queue."""
    if heartbeat_interval(trial.storage):
        trial.storage.record_heartbeat(trial_id(trial))


@contextmanager
def beating(trial: optuna.Trial) -> Iterator[None]:
    """Beat ``trial`` once per heartbeat interval while the block runs (Optuna's
    ``study.optimize`` does the same in its own thread; the worker runs its trials itself).
    The first beat is ``first_heartbeat``'s, written at ask."""
    interval = heartbeat_interval(trial.storage)
    if not interval:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval):
            trial.storage.record_heartbeat(trial_id(trial))

    thread = threading.Thread(target=beat, name=f"heartbeat-trial-{trial.number}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def stale_reason(grace_seconds: float) -> str:
    return f"no heartbeat for over {grace_seconds:g}s: its worker died, hung or lost the database"


def fail_stale(study: optuna.Study) -> list[FrozenTrial]:
    """Fail the study's RUNNING trials whose heartbeat stopped (or that never beat, a grace
    period after this first saw them: ``stale_trial_ids``), each recording why
    (``fail_reason``), queue their retries (the storage's stale-trial callback), log a line
    for each and return them. Optuna's ``fail_stale_trials`` plus the reason. Behind the gRPC
    proxy it does nothing: the proxy host judges beats there (``hpo storage-proxy``)."""
    storage = study_storage(study)
    backend = uncached(storage)
    if not isinstance(backend, OneStatementHeartbeat) or backend.heartbeat_interval is None:
        return []
    grace = _grace_seconds(backend)
    with as_storage_error("the stale-trial sweep"):  # waited out like Optuna's own errors
        stale_ids = backend.stale_trial_ids(study_id(study), adopt_unbeaten=True)
    if not stale_ids:
        return []
    retry = backend.get_heartbeat_stale_trial_callback()
    # failed and queued again with no trial started in between (``trial_start_lock``)
    with trial_start_lock(study), as_storage_error("the stale-trial sweep"):
        failed = [
            storage.get_trial(stale)
            for stale in stale_ids
            if _fail_with_reason(backend, stale, stale_reason(grace))
        ]
        for trial in failed:
            if retry is not None:
                retry(study, without_fail_reason(trial))
    for trial in failed:
        log.warning(
            "trial %d FAIL: %s; queued again with the same parameters unless it ran out of retries",
            trial.number,
            trial.user_attrs[FAIL_REASON_ATTR],
        )
    return failed


def _fail_with_reason(backend: RDBStorage, trial_id: int, reason: str) -> bool:
    """FAIL a RUNNING trial and record ``fail_reason``, in one transaction: a trial that
    finishes meanwhile (its worker was only slow) is left as it ended, with no reason added."""
    trials, attrs = TrialModel, TrialUserAttributeModel
    with backend.engine.begin() as connection:
        failed = connection.execute(
            sa.update(trials)
            .where(trials.trial_id == trial_id, trials.state == TrialState.RUNNING)
            .values(state=TrialState.FAIL, datetime_complete=_utc_now())
        ).rowcount
        if failed:
            insert = _INSERTS[backend.engine.dialect.name](attrs).values(
                trial_id=trial_id, key=FAIL_REASON_ATTR, value_json=json.dumps(reason)
            )
            connection.execute(
                insert.on_conflict_do_update(
                    index_elements=["trial_id", "key"],
                    set_={"value_json": insert.excluded.value_json},
                )
            )
    return bool(failed)


def without_fail_reason(trial: FrozenTrial) -> FrozenTrial:
    """``trial`` as its retry should copy it: the retry has not failed."""
    trial = copy.deepcopy(trial)
    trial.user_attrs = {
        key: value for key, value in trial.user_attrs.items() if key != FAIL_REASON_ATTR
    }
    return trial
