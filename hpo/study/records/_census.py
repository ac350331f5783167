"""How far a study is: trial counts by state, the best value, and the pace; and a worker starting
and claiming a trial."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import optuna
import sqlalchemy as sa
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.orm import Session

from hpo.attributes import FAIL_REASON_ATTR, RETRY_HISTORY_ATTR
from hpo.study.records._trials import best_full_trial, set_user_attrs, user_attrs_transaction
from hpo.study.storage._connect import rdb_backend
from hpo.study.storage._db_errors import as_storage_error
from hpo.study.storage._optuna_private import (
    TrialModel,
    TrialSystemAttributeModel,
    TrialUserAttributeModel,
    study_id,
    study_storage,
)
from hpo.study.storage._start_lock import trial_start_lock

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
# starts the fail_reason of a trial the worker declined: bookkeeping, not a failure
SURPLUS = "surplus:"
REASON_CHARS = 120  # a failure's reason in the summary: its first line, cut to this


@dataclass(frozen=True)
class TrialCounts:
    """A study's trials by state and its best value, as ``hpo tune``'s bar, ``hpo status`` and
    ``hpo report`` show them. ``requeued``: FAIL trials queued again; ``failed``: the other FAIL
    trials, surplus ones (bookkeeping) left out."""

    complete: int = 0
    pruned: int = 0
    failed: int = 0
    requeued: int = 0
    running: int = 0
    waiting: int = 0
    best: float | None = None  # None: no completed full run yet, or no single best

    @property
    def finished(self) -> int:
        return self.complete + self.pruned

    @classmethod
    def from_census(
        cls,
        census: Mapping[str, int],
        requeued: int = 0,
        surplus: int = 0,
        best: float | None = None,
    ) -> TrialCounts:
        """From a ``trial_census``, whose ``fail`` counts the re-queued and surplus trials too."""
        return cls(
            complete=census["complete"],
            pruned=census["pruned"],
            failed=census["fail"] - requeued - surplus,
            requeued=requeued,
            running=census["running"],
            waiting=census["waiting"],
            best=best,
        )


def is_surplus(trial: FrozenTrial) -> bool:
    return str(trial.user_attrs.get(FAIL_REASON_ATTR, "")).startswith(SURPLUS)


def trial_census(study: optuna.Study, before: int | None = None) -> dict[str, int]:
    """Trials per state (lower-case names), ``finished`` (complete + pruned) and
    ``running_before`` (running trials numbered below ``before``), in one GROUP BY query.

    Hand-written because Optuna's ``get_n_trials`` fetches every trial (30 ms at trial
    800 here) and workers count twice per trial (once inside ``claim``).
    """
    backend = rdb_backend(study_storage(study))
    if backend is None:  # the gRPC proxy: no SQL, so count what it returns
        return _tally(study, before)
    # a revoked privilege here ended `hpo tune` with a traceback (``claim`` runs in Optuna's
    # session, which does the same)
    with as_storage_error("the trial census"), backend.engine.connect() as connection:
        return _tally(study, before, connection)


@contextmanager
def trial_start(study: optuna.Study) -> Iterator[dict[str, int]]:
    """The study's ``trial_census``, taken under the lock that workers hold from their count
    until the trial they then ask for exists (``trial_start_lock``): two workers counting at
    once both saw room for the last trial, both started one, and the later stepped aside as a
    FAIL trial ("surplus"), red in the dashboard and ``hpo export`` though no failure."""
    with trial_start_lock(study) as connection:
        if connection is None:
            yield trial_census(study)
            return
        with as_storage_error("the trial census"):
            census = _tally(study, None, connection)
        yield census


def room_for_a_trial(census: Mapping[str, int], n_trials: int) -> bool:
    """Whether a worker may start a trial: the finished and running ones leave room, or a
    queued one waits (a retry, the warm start), which ``study.ask`` hands out first."""
    return census["finished"] + census["running"] < n_trials or census["waiting"] > 0


def claim(trial: optuna.Trial, attrs: Mapping[str, object]) -> dict[str, int]:
    """Record ``attrs`` on a trial this worker has just started and take the census of the
    trials before it (``trial_census(before=trial.number)``), in one transaction: the
    worker's per-trial bookkeeping in one round of the database instead of two (bench P3)."""
    backend = rdb_backend(trial.storage)
    if backend is None:
        set_user_attrs(trial, attrs)
        return _tally(trial.study, trial.number)
    with user_attrs_transaction(backend, trial, attrs) as session:
        return _tally(trial.study, trial.number, session)


def _tally(
    study: optuna.Study, before: int | None, connection: sa.Connection | Session | None = None
) -> dict[str, int]:
    if connection is None:
        rows = [
            (t.state, before is not None and t.number < before, 1)
            for t in study.get_trials(deepcopy=False)
        ]
    else:
        trial = TrialModel
        early = trial.number < (before if before is not None else -1)
        query = (
            sa.select(trial.state, early, sa.func.count())
            .where(trial.study_id == study_id(study))
            .group_by(trial.state, early)
        )
        rows = [(state, bool(is_early), n) for state, is_early, n in connection.execute(query)]
    census = {state.name.lower(): 0 for state in TrialState} | {"running_before": 0}
    for state, is_early, n in rows:
        census[state.name.lower()] += n
        if state == TrialState.RUNNING and is_early:
            census["running_before"] += n
    census["finished"] = census["complete"] + census["pruned"]
    return census


def state_counts(study: optuna.Study) -> TrialCounts:
    """Trial counts by state and the best value, from COUNT queries (cheap to poll). A FAIL
    trial queued again with the same parameters (interrupted, its worker dead, the database
    gone) counts as ``requeued``, not ``failed``; a surplus one (bookkeeping) as neither."""
    backend = rdb_backend(study_storage(study))
    if backend is None:
        census, (requeued, surplus) = _tally(study, None), _set_aside(study)
    else:
        with as_storage_error("the trial census"), backend.engine.connect() as connection:
            census = _tally(study, None, connection)
            requeued, surplus = _set_aside(study, connection)
    best = best_full_trial(study)  # None: no completed full run yet
    return TrialCounts.from_census(
        census, requeued=requeued, surplus=surplus, best=None if best is None else best.value
    )


def _set_aside(study: optuna.Study, connection: sa.Connection | None = None) -> tuple[int, int]:
    """The FAIL trials that are no failure of their own: those queued again (each retry that
    Optuna's retry callback queued carries ``failed_trial``), and the surplus ones."""
    if connection is None:  # the gRPC proxy: no SQL
        trials = study.get_trials(deepcopy=False)
        return (
            sum("failed_trial" in t.system_attrs for t in trials),
            sum(t.state == TrialState.FAIL and is_surplus(t) for t in trials),
        )
    trial, system, user = TrialModel, TrialSystemAttributeModel, TrialUserAttributeModel
    of_study = trial.study_id == study_id(study)
    retries = (
        sa.select(sa.func.count())
        .select_from(system)
        .join(trial, trial.trial_id == system.trial_id)
        .where(of_study, system.key == "failed_trial")
    )
    surplus = (
        sa.select(sa.func.count())
        .select_from(user)
        .join(trial, trial.trial_id == user.trial_id)
        .where(
            of_study,
            trial.state == TrialState.FAIL,
            user.key == FAIL_REASON_ATTR,
            user.value_json.startswith(json.dumps(SURPLUS)[:-1], autoescape=True),
        )
    )
    requeued, surplus_count = connection.execute(
        sa.select(retries.scalar_subquery(), surplus.scalar_subquery())
    ).one()
    return requeued, surplus_count


@dataclass(frozen=True)
class TrialOutcomes:
    """How a study's trials ended, for the summary ``hpo tune`` ends with."""

    counts: TrialCounts  # its ``best`` left None: the summary names the best trial itself
    failures: list[tuple[str, int]]  # (a reason's first line, trials), most frequent first


def trial_outcomes(study: optuna.Study) -> TrialOutcomes:
    """Counts by state (``requeued``: FAIL trials queued again, surplus ones left out) and the
    failures grouped by reason (its first line), most frequent first."""
    trials = study.get_trials(deepcopy=False)
    retried = {n for t in trials for n in t.system_attrs.get(RETRY_HISTORY_ATTR, ())}
    counts = dict.fromkeys(("complete", "pruned", "failed", "requeued", "running", "waiting"), 0)
    reasons: Counter[str] = Counter()
    for t in trials:
        if t.state != TrialState.FAIL:
            counts[t.state.name.lower()] += 1
        elif t.number in retried:
            counts["requeued"] += 1
        elif not is_surplus(t):
            counts["failed"] += 1
            reason = str(t.user_attrs.get(FAIL_REASON_ATTR) or "no reason recorded").strip()
            reasons[(reason.splitlines() or ["no reason recorded"])[0][:REASON_CHARS]] += 1
    return TrialOutcomes(TrialCounts(**counts), reasons.most_common())


def trials_per_hour(study: optuna.Study) -> float | None:
    """Finished trials per hour of wall time so far; None before two have finished."""
    done = study.get_trials(deepcopy=False, states=FINISHED)
    if len(done) < 2:
        return None
    start = min(t.datetime_start for t in done)
    end = max(t.datetime_complete for t in done)
    hours = (end - start).total_seconds() / 3600
    return len(done) / hours if hours > 0 else None


def recent_outcomes(study: optuna.Study, k: int) -> list[tuple[str, str | None]]:
    """The last ``k`` trials to end, oldest first, as (state, fail_reason); surplus
    trials (bookkeeping of the exact count, not failures) are left out."""
    ended = [
        t
        for t in study.get_trials(deepcopy=False, states=(*FINISHED, TrialState.FAIL))
        if not is_surplus(t)
    ]
    ended.sort(key=lambda t: (t.datetime_complete or t.datetime_start, t.number))
    return [(t.state.name.lower(), t.user_attrs.get(FAIL_REASON_ATTR)) for t in ended[-k:]]
