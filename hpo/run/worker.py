"""One worker process: pulls trials of a shared study until it holds ``n_trials``
finished (COMPLETE + PRUNED) trials.

Each trial lives in ``_run_trial`` as in Optuna's ``study.optimize`` (ask, heartbeat,
objective, tell), so that the worker, not the storage, decides when to look for stale
trials: once per heartbeat interval. A dead worker's trial is failed by the heartbeat and
re-queued with the same parameters. Between trials the worker checks the count itself, so
N workers end the study at exactly ``n_trials``: when the remaining trials are all running
elsewhere it waits, failing stale ones, in case one of them dies. It counts and asks under
the study's trial-start lock (``trial_start``), so two workers never both take the last place.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from hpo.attributes import (
    FAIL_REASON_ATTR,
    WORKER_ATTR,
)
from hpo.errors import find_cause
from hpo.process import interruptible, stop_signals_deferred
from hpo.run.interrupt import INTERRUPTED, interrupted
from hpo.run.objective import Objective
from hpo.run.trial_line import TrialLog, searched_names
from hpo.spec import StudySpec
from hpo.study import open_study, study_exists
from hpo.study.records import (
    SURPLUS,
    claim,
    fail_trials_of_worker,
    room_for_a_trial,
    study_uid,
    trial_census,
    trial_start,
)
from hpo.study.search import first_look_epochs, study_deadline, time_budget_spent
from hpo.study.storage import (
    DatabaseProblem,
    beating,
    caused_by_database,
    database_error_text,
    database_problem,
    fail_stale,
    first_heartbeat,
)

log = logging.getLogger(__name__)

MAX_CONSECUTIVE_FAILURES = 5  # a worker whose every trial fails stops instead of burning the budget
# while the last trials run elsewhere: one COUNT query a second sees the study end
IDLE_POLL_SECONDS = 1.0
DATABASE_RETRY_SECONDS = (
    1,
    2,
    5,
    10,
    20,
    30,
)  # back-off while the database is unreachable, then every 30 s
# rides out a restart or a maintenance window; then stops, in one line
DATABASE_OUTAGE_SECONDS = 600


class WorkerStopped(RuntimeError):
    """The worker cannot go on; the message says why in one line and what to do."""

    exit_code = 1


class TooManyFailures(WorkerStopped):
    pass


class DatabaseUnreachable(WorkerStopped):
    pass


class StudyGone(WorkerStopped):
    exit_code = 2  # deleted on purpose: a replacement worker would only create it again


class SurplusTrial(Exception):
    """The study already holds ``n_trials`` finished or running trials: this one is not run."""


def run_worker(
    spec: StudySpec,
    worker: str = "0",
    poll_seconds: float = IDLE_POLL_SECONDS,
    objective: Callable[[optuna.Trial], float] | None = None,
    allow_spec_change: bool = False,
) -> int:
    """Run trials until the study is done; returns how many trials this worker ran.

    ``objective`` defaults to fine-tuning per the spec; tests pass a fast one.
    """
    first_look = first_look_epochs(spec)  # what a trial started late must still reach
    trial_log = TrialLog(
        spec.metric, searched_names(spec), spec.prune_on, spec.pruner.units_per_epoch
    )
    look_for_stale = _StaleLook(spec.heartbeat.interval)
    ran, failures = 0, 0
    outage = _Outage(worker)
    # why the database dropped this worker's trial, until the trial is failed for it
    lost: str | None = None
    study: optuna.Study | None = None
    deadline: float | None = None
    guarded: _Guarded | None = None
    with interruptible():
        try:
            while True:
                try:
                    if guarded is None:  # here, so an outage as the worker starts is waited out
                        study = open_study(spec, worker=worker, allow_spec_change=allow_spec_change)
                        deadline = study_deadline(study)  # `hpo tune --timeout` set it
                        guarded = _Guarded(
                            objective
                            or Objective(
                                spec, uid=study_uid(study), worker=worker, deadline=deadline
                            ),
                            spec.n_trials,
                            worker,
                        )
                    if lost:
                        _fail_lost_trial(study, worker, lost, spec.heartbeat.max_retry)
                        lost = None
                    if _study_done(study, spec.n_trials, poll_seconds, look_for_stale, deadline):
                        return ran
                    if (no_room := time_budget_spent(study, deadline, first_look)) is not None:
                        log.info("worker %s: %s; stopping", worker, no_room)
                        return ran
                    look_for_stale(study)
                    started = _run_trial(study, guarded, trial_log)
                    outage = _Outage(worker)
                    if not started:  # another worker took the last place meanwhile
                        continue
                except optuna.exceptions.UpdateFinishedTrialError as exc:
                    # Another worker failed this trial as stale (we were cut off); its retry runs
                    # instead.
                    log.warning("worker %s: %s; its re-queued copy will run", worker, exc)
                    continue
                except Exception as exc:
                    # Optuna 5.0 can raise UnboundLocalError over the storage's KeyError.
                    if (
                        study is not None
                        and find_cause(exc, lambda seen: isinstance(seen, KeyError))
                        and not study_exists(study)
                    ):
                        raise StudyGone(
                            f"worker {worker}: study {spec.name!r} was deleted from its storage "
                            "while this worker ran; stopping"
                        ) from None
                    # The database went away (restart, network): wait and reconnect. A trial it
                    # interrupted stays RUNNING; once the database is back this worker fails it
                    # with the reason and re-queues it (or another worker does, as stale, if that
                    # comes first).
                    if not caused_by_database(exc):
                        raise
                    if guarded is not None:  # started: it may have been running a trial
                        lost = lost or (
                            f"database unreachable during the trial ({database_error_text(exc)})"
                        )
                    outage.wait(database_problem(study, exc))
                    continue
                ran += 1
                failures = failures + 1 if trial_log.last_failed else 0
                if failures >= MAX_CONSECUTIVE_FAILURES:
                    raise TooManyFailures(
                        f"worker {worker}: {failures} trials in a row failed; last: "
                        f"{trial_log.last_reason}"
                    )
        except KeyboardInterrupt:
            number = guarded.current_trial if guarded is not None else None
            log.warning("%s", interrupted(study, worker, number, spec.heartbeat))
            raise


class _Outage:
    """Waiting for the database: backing off while it is unreachable, refusing or restarting
    (a maintenance window is ridden out), then stopping in one line. A new one per outage."""

    def __init__(self, worker: str):
        self.worker, self.seconds, self.tries = worker, 0.0, 0

    def wait(self, problem: DatabaseProblem) -> None:
        if self.seconds >= DATABASE_OUTAGE_SECONDS:
            raise DatabaseUnreachable(gave_up(self.worker, problem, self.seconds)) from None
        delay = DATABASE_RETRY_SECONDS[min(self.tries, len(DATABASE_RETRY_SECONDS) - 1)]
        log.warning("worker %s: %s; retrying in %ss", self.worker, problem, delay)
        time.sleep(delay)
        self.seconds, self.tries = self.seconds + delay, self.tries + 1


def gave_up(worker: str, problem: DatabaseProblem, seconds: float) -> str:
    """Why a worker stops after waiting ``seconds`` for the database, and what is true of the
    study then: gone with a dropped database; otherwise kept as last written, with its trials
    left RUNNING failed and re-queued by the next worker on it."""
    said = f"worker {worker}: stopping after {seconds:.0f}s of waiting: {problem}"
    if problem.gone:
        return said
    return (
        f"{said}; the trials it recorded stay in it, and once it answers again `hpo tune` resumes "
        "the study (the trials this outage left RUNNING are failed as stale and re-queued)"
    )


def _run_trial(study: optuna.Study, guarded: _Guarded, trial_log: TrialLog) -> bool:
    """One trial's whole life, as Optuna's ``study.optimize`` runs it (ask, heartbeat,
    objective, tell) but without its stale-trial query before every trial: ``run_worker``
    looks once per heartbeat interval. Each trial gets one log line; an interrupted one gets
    none here (``run_worker`` says it was re-queued) instead of Optuna's 60-line traceback.
    False when the study had no room left for it, and nothing was started."""
    trial = _ask(study, guarded)
    if trial is None:
        return False
    value, state, error = None, None, None
    with beating(trial):
        try:
            value = guarded(trial)
        except optuna.TrialPruned:
            state = TrialState.PRUNED
        except (Exception, KeyboardInterrupt) as exc:  # the objective recorded why (fail_reason)
            state, error = TrialState.FAIL, exc
    if isinstance(error, Exception) and caused_by_database(error):
        raise error  # left RUNNING: once the database is back, run_worker fails it saying so
    if isinstance(error, KeyboardInterrupt):
        # FAIL now, or still RUNNING if the tell failed; run_worker re-queues it either way
        with contextlib.suppress(Exception):
            study.tell(trial, value, state=state)
        raise error
    # skip_if_finished: while the database was away the trial's heartbeat went unwritten, and
    # a worker that got through first may have failed it as stale and queued it again
    finished = study.tell(trial, value, state=state, skip_if_finished=True)
    guarded.current_trial = None  # told: an interrupt now has nothing to re-queue
    if finished.state != (state or TrialState.COMPLETE):
        log.warning(
            "trial %d was failed as stale while this worker could not reach the database, and "
            "queued again; this run of it is dropped",
            finished.number,
        )
        return True
    if line := trial_log(finished):
        log.info("%s", line)
    return True


class _StaleLook:
    """When this worker looks for stale trials: at most once per heartbeat interval. A trial
    goes stale grace_period after its last beat and beats come once an interval, so looking
    once an interval notices a dead worker at most an interval later and spares short trials
    a query each (bench P3). The storage answers every look from the database."""

    def __init__(self, interval: float):
        self.interval, self.next_at = interval, -math.inf

    def __call__(self, study: optuna.Study) -> None:
        if time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + self.interval
        fail_stale(study)


def _fail_lost_trial(study: optuna.Study, worker: str, reason: str, max_retry: int) -> None:
    """Once the database is back: fail the trial it dropped (still RUNNING as this worker's),
    recording ``reason``, queue it again, and say so."""
    for number in fail_trials_of_worker(study, worker, reason, max_retry):
        # the worker's name is the line's prefix
        log.warning("trial %d FAIL (%s); queued again with the same parameters", number, reason)


def _study_done(
    study: optuna.Study,
    n_trials: int,
    poll_seconds: float,
    look_for_stale: _StaleLook,
    deadline: float | None = None,
) -> bool:
    """True once n_trials are finished, or the time budget is spent. While the remaining ones all
    run elsewhere, wait here (failing stale trials, which re-queues a dead worker's trial) rather
    than start a surplus trial."""
    while True:
        census = trial_census(study)
        if census["finished"] >= n_trials or (deadline is not None and time.time() >= deadline):
            return True
        if room_for_a_trial(census, n_trials):
            return False
        look_for_stale(study)
        time.sleep(poll_seconds)


class _Guarded:
    """Wraps the objective: two workers can start the last trial at once; the later one
    steps aside so the study ends with exactly n_trials finished trials."""

    def __init__(self, objective: Callable[[optuna.Trial], float], n_trials: int, worker: str):
        self.objective, self.n_trials, self.worker = objective, n_trials, worker
        self.current_trial: int | None = None  # its number; re-queued if the worker is interrupted

    def __call__(self, trial: optuna.Trial) -> float:
        self.current_trial = trial.number
        try:
            # Finished trials, running ones started before this one, and queued retries (they must
            # run for no trial to be lost), read in one query so no trial slips between two counts.
            census = claim(trial, {WORKER_ATTR: self.worker})
            claimed = census["finished"] + census["running_before"] + census["waiting"]
            if claimed >= self.n_trials:
                trial.set_user_attr(
                    FAIL_REASON_ATTR, f"{SURPLUS} the study already has {self.n_trials} trials"
                )
                raise SurplusTrial(f"the study already has {self.n_trials} trials")
            return self.objective(trial)
        except (optuna.TrialPruned, SurplusTrial):
            raise
        except (
            Exception
        ) as exc:  # every failure keeps its reason, whichever step of the trial raised
            with (
                stop_signals_deferred()
            ):  # a stop signal (the launcher ending the study) waits for it
                trial.set_user_attr(FAIL_REASON_ATTR, failure_reason(exc))
            raise
        except KeyboardInterrupt:
            # the interrupt must win over a database error here, or the worker would carry on
            # as if in an outage; without the reason the trial still counts as interrupted
            with contextlib.suppress(Exception):
                trial.set_user_attr(FAIL_REASON_ATTR, INTERRUPTED)
            raise


def _ask(study: optuna.Study, guarded: _Guarded) -> optuna.Trial | None:
    """``study.ask`` with stop signals held until the new trial is known to this worker; None,
    asking nothing, when the count taken under the study's trial-start lock leaves no room.

    ``ask`` creates the RUNNING trial; a Ctrl-C or SIGTERM (a Slurm pre-emption) landing
    before the worker knows its number would leave a RUNNING trial that no heartbeat would
    ever mark stale, so the study could never end. The trial's first beat is written here
    too, at once, for a worker killed outright before ``beating`` starts.
    """
    with stop_signals_deferred():
        with trial_start(study) as census:  # counted and created before another worker counts
            if not room_for_a_trial(census, guarded.n_trials):
                return None
            trial = study.ask()
        guarded.current_trial = trial.number
        first_heartbeat(trial)
    return trial


def failure_reason(exc: BaseException) -> str:
    """What a failed trial records: the error's type and message, bounded for the database."""
    return f"{type(exc).__name__}: {exc}"[:1000]
