"""A worker stopped by a signal (Ctrl-C, SIGTERM, its launcher ending the study): the trial it
was running is failed as interrupted and queued again with the same parameters, so resuming
the study loses nothing, and the worker says so in one line, never a traceback."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from hpo.attributes import FAIL_REASON_ATTR
from hpo.errors import find_cause
from hpo.spec import HeartbeatSpec
from hpo.study import study_exists
from hpo.study.records import fail_running, find_trial, requeue
from hpo.study.storage import caused_by_database, database_problem, trial_start_lock

# an interrupted trial's fail_reason
INTERRUPTED = "interrupted (Ctrl-C, SIGTERM, or its launcher stopping it)"


def interrupted(
    study: optuna.Study | None, worker: str, number: int | None, heartbeat: HeartbeatSpec
) -> str:
    """Re-queue the trial a stop signal interrupted and say so, in one line. A database that
    refuses or lost the study meanwhile leaves the trial RUNNING: its beat has stopped, so the
    next worker on the study fails it as stale and re-queues it (``fail_stale``)."""
    try:
        requeued = _requeue_interrupted(study, number, heartbeat.max_retry)
    except Exception as exc:
        # the study deleted while the stop came (its launcher stops the workers for it)
        if find_cause(exc, lambda seen: isinstance(seen, KeyError)) and not study_exists(study):
            return f"worker {worker} interrupted; its study was deleted from its storage"
        if not caused_by_database(exc):
            raise
        problem = database_problem(study, exc)
        said = f"worker {worker} interrupted; could not re-queue its trial {number}: {problem}"
        if problem.gone:
            return said
        return (
            f"{said}; it stays RUNNING until a worker on the study (the next `hpo tune`) fails "
            f"it as stale, {heartbeat.grace_period}s after its last heartbeat, and re-queues it"
        )
    if requeued:
        return f"worker {worker} interrupted; its running trial {number} was re-queued"
    return f"worker {worker} interrupted"


def _requeue_interrupted(study: optuna.Study | None, number: int | None, max_retry: int) -> bool:
    """The trial that Ctrl-C / SIGTERM interrupted is FAIL now (or still RUNNING, when the
    signal came between its creation and its objective: failed here); queue it again with
    the same parameters, so resuming the study loses nothing. A trial that had already
    failed for its own reason (or was surplus) when the signal came is not retried."""
    if number is None:
        return False
    with trial_start_lock(study):  # no trial starts between the failure and its retry
        trial = find_trial(study, number)
        if trial is not None and trial.state == TrialState.RUNNING:
            fail_running(study, trial, INTERRUPTED)
            trial = find_trial(study, number)
        interrupted = (
            trial is not None and trial.user_attrs.get(FAIL_REASON_ATTR, INTERRUPTED) == INTERRUPTED
        )
        if interrupted and trial.state == TrialState.FAIL:  # not failed for its own reason first
            requeue(study, trial, max_retry)
            return True
    return False
