"""Optuna's gRPC storage proxy and the stale-trial sweep that stands in for heartbeats behind it.

Optuna keeps heartbeats in an RDB table the proxy does not expose, so an hpo worker behind
the proxy writes each beat as the trial system attribute ``hpo:heartbeat`` instead, and the
proxy host judges them on its own clock: a RUNNING trial whose beat has not changed for
its grace period is failed and a WAITING copy with the same parameters is queued. A
RUNNING trial that never beat — a client other than an hpo worker — is failed the same way
once it has run ``max_trial_seconds``.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from hpo.attributes import HEARTBEAT_ATTR, RETRY_HISTORY_ATTR
from hpo.spec import HeartbeatSpec
from hpo.storage_url import StorageUrl
from hpo.study.records._trials import requeue
from hpo.study.storage._connect import get_storage
from hpo.study.storage._optuna_private import cached, trial_id

log = logging.getLogger(__name__)

# for trials that never beat (theirs travels with the beat)
DEFAULT_MAX_RETRY = HeartbeatSpec().max_retry

# {trial id: (last beat seen, time.monotonic() when first seen)}, kept between sweeps.
Beats = dict[int, tuple[object, float]]


def proxy_storage(url: StorageUrl) -> BaseStorage:
    """Optuna's advice for the proxy: its cached storage, which reads only new or running trials."""
    return cached(get_storage(url))


def run_proxy_server(storage: BaseStorage, host: str, port: int) -> None:
    optuna.storages.run_grpc_proxy_server(storage, host=host, port=port)


def sweep_stale_trials(
    storage: BaseStorage,
    max_trial_seconds: float,
    beats: Beats | None = None,
    max_retry: int = DEFAULT_MAX_RETRY,
) -> list[int]:
    """One pass over every study: fail stale RUNNING trials, queue a WAITING copy of each
    with the same parameters, and return the failed trials' ids.

    A trial with a beat is stale once the same beat has been seen for longer than its
    grace period; that takes two passes sharing ``beats``, so a beat is never judged on
    another machine's clock. A trial without one is stale after ``max_trial_seconds``
    (from its start, stamped by the storage on this host)."""
    beats = {} if beats is None else beats
    running: set[int] = set()
    failed = []
    for summary in storage.get_all_studies():
        trials = storage.get_all_trials(
            storage.get_study_id_from_name(summary.study_name),
            deepcopy=False,
            states=(TrialState.RUNNING,),
        )
        now, wall = (
            time.monotonic(),
            datetime.now(),
        )  # when these beats were read, not when the pass began
        for trial in trials:
            running.add(trial_id(trial))
            beat = trial.system_attrs.get(HEARTBEAT_ATTR)
            if beat is None:
                age = (wall - trial.datetime_start).total_seconds() if trial.datetime_start else 0.0
                if age <= max_trial_seconds:
                    continue
                why = f"no heartbeat, running {age:.0f}s > {max_trial_seconds:g}s"
            else:
                seen = beats.get(trial_id(trial))
                if seen is None or seen[0] != beat:
                    beats[trial_id(trial)] = (beat, now)
                    continue
                grace = float(beat.get("grace_period", 0)) if isinstance(beat, dict) else 0.0
                if now - seen[1] <= grace:
                    continue
                why = f"no heartbeat for {now - seen[1]:.0f}s > grace_period {grace:g}s"
            if _fail_and_requeue(
                storage, summary.study_name, trial, why, _max_retry(beat, max_retry)
            ):
                failed.append(trial_id(trial))
                running.discard(trial_id(trial))
    for gone in set(beats) - running:
        del beats[gone]
    return failed


def _max_retry(beat: object, default: int) -> int:
    return int(beat.get("max_retry", default)) if isinstance(beat, dict) else default


def _fail_and_requeue(
    storage: BaseStorage, study_name: str, trial: FrozenTrial, why: str, max_retry: int
) -> bool:
    try:
        if not storage.set_trial_state_values(trial_id(trial), state=TrialState.FAIL):
            return False
    except UpdateFinishedTrialError:  # it finished (or a worker failed it) since we looked
        return False
    failed = storage.get_trial(trial_id(trial))
    retries = len(failed.system_attrs.get(RETRY_HISTORY_ATTR, []))
    requeue(optuna.load_study(study_name=study_name, storage=storage), failed, max_retry)
    what = (
        "re-queued with the same parameters"
        if retries < max_retry
        else f"not re-queued: max_retry={max_retry} reached"
    )
    log.warning("study %s: trial %d failed as stale (%s); %s", study_name, trial.number, why, what)
    return True
