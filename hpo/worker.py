"""One worker process: pulls trials of a shared study until it holds ``n_trials``
finished (COMPLETE + PRUNED) trials.

Trials run through ``study.optimize`` (one at a time) because Optuna's heartbeats only
work there; a dead worker's trial is failed by the heartbeat and re-queued with the same
parameters. Between trials the worker checks the count itself, so N workers end the
study at exactly ``n_trials``: when the remaining trials are all running elsewhere it
waits, failing stale ones, in case one of them dies.
"""

from __future__ import annotations

import logging
import signal
import time

import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback, fail_stale_trials
from optuna.trial import FrozenTrial, TrialState

from hpo.objective import Objective
from hpo.spec import StudySpec
from hpo.study import FINISHED, MAX_RETRY, count_trials, open_study

log = logging.getLogger(__name__)

MAX_CONSECUTIVE_FAILURES = 5  # a worker whose every trial fails stops instead of burning the budget
IDLE_POLL_SECONDS = 5.0


class TooManyFailures(RuntimeError):
    pass


def run_worker(spec: StudySpec, worker: str = "0", num_threads: int | None = None,
               poll_seconds: float = IDLE_POLL_SECONDS) -> int:
    """Run trials until the study is done; returns how many trials this worker ran."""
    study = open_study(spec, worker=worker)
    objective = Objective(spec, worker=worker, num_threads=num_threads)
    trial_log = _TrialLog(worker)
    _stop_on_signals()
    ran, failures = 0, 0
    try:
        while True:
            finished = count_trials(study, FINISHED)
            if finished >= spec.n_trials:
                return ran
            if finished + count_trials(study, (TrialState.RUNNING,)) >= spec.n_trials and not count_trials(
                study, (TrialState.WAITING,)
            ):
                fail_stale_trials(study)  # a dead worker's last trial comes back as WAITING
                time.sleep(poll_seconds)
                continue
            study.optimize(objective, n_trials=1, catch=(Exception,), callbacks=[trial_log])
            ran += 1
            failures = failures + 1 if trial_log.last_failed else 0
            if failures >= MAX_CONSECUTIVE_FAILURES:
                raise TooManyFailures(f"worker {worker}: {failures} trials in a row failed; last: {trial_log.last_reason}")
    except KeyboardInterrupt:
        _requeue_interrupted(study, objective.current_trial_id)
        log.warning("worker %s interrupted; its running trial was re-queued", worker)
        raise


def _stop_on_signals() -> None:
    """SIGINT and SIGTERM both raise KeyboardInterrupt, so the running trial is re-queued;
    set explicitly because a process started in the background inherits SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def _requeue_interrupted(study: optuna.Study, trial_id: int | None) -> None:
    """The trial that Ctrl-C / SIGTERM interrupted is FAIL now; queue it again with the
    same parameters (Optuna's own retry callback), so resuming the study loses nothing."""
    if trial_id is None:
        return
    trial = study._storage.get_trial(trial_id)
    if trial.state == TrialState.FAIL and not _is_surplus(trial):
        RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)(study, trial)


def _is_surplus(trial: FrozenTrial) -> bool:
    return str(trial.user_attrs.get("fail_reason", "")).startswith("surplus")


class _TrialLog:
    """One log line per trial, and what the worker needs to know about its last one."""

    def __init__(self, worker: str):
        self.worker, self.last_failed, self.last_reason = worker, False, None

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        attrs = trial.user_attrs
        surplus = _is_surplus(trial)
        self.last_failed = trial.state == TrialState.FAIL and not surplus
        self.last_reason = attrs.get("fail_reason")
        if surplus:
            return
        value = f"{trial.value:.4f}" if trial.value is not None else "-"
        reason = f" reason={self.last_reason!r}" if self.last_reason else ""
        params = " ".join(f"{k}={_short(v)}" for k, v in trial.params.items())
        log.info("worker %s trial %d %s value=%s epochs=%s %.1fs %s%s", self.worker, trial.number,
                 trial.state.name, value, attrs.get("epochs_run", "-"), attrs.get("wall_seconds", 0.0), params, reason)


def _short(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
