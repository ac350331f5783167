"""A study's time as ``hpo status`` shows it: when it will end, from the running trials' own
ETAs (``hpo.train.loop``'s pace, recorded in each trial's ``progress`` user attribute) and the
trials left; and how close ``hpo validate --estimate`` came to the epochs the trials measure."""

from __future__ import annotations

import heapq
import statistics
import time
from collections.abc import Sequence

import optuna
from optuna.trial import FrozenTrial

from hpo.attributes import EPOCHS_RUN_ATTR, PROGRESS_ATTR, SETUP_SECONDS_ATTR, WALL_SECONDS_ATTR
from hpo.spec import StudySpec
from hpo.study.records._census import FINISHED
from hpo.study.records._trials import completed_trials, running_trials
from hpo.study.search._strategy import read_estimate


def finish_in(
    running: Sequence[float | None], left: int, trial_seconds: float | None
) -> float | None:
    """Seconds until the last trial ends (pure): ``running`` holds each running trial's own
    seconds to go (None: just started, taken as a whole trial), ``left`` the trials not
    started yet, each ``trial_seconds`` long and taken by the first worker to come free.
    The running trials are the workers: None when none runs (nothing moves the study), or
    when a trial's length is needed and unknown."""
    if not running:
        return None
    if trial_seconds is None and (left or None in running):
        return None
    free_at = [trial_seconds if eta is None else eta for eta in running]
    heapq.heapify(free_at)
    for _ in range(left):
        heapq.heappush(free_at, heapq.heappop(free_at) + trial_seconds)
    return max(free_at)


def study_eta_seconds(study: optuna.Study, n_trials: int | None) -> float | None:
    """``finish_in`` for ``study``: each running trial's ETA as its pace last recorded it (less
    the time since), the trials ``n_trials`` still wants started, and the mean length of the
    finished trials (pruned ones too: the trials to come will be pruned as often)."""
    if not n_trials:
        return None
    now = time.time()
    running = running_trials(study)
    etas = [_trial_eta(trial, now) for trial in running]
    finished = study.get_trials(deepcopy=False, states=FINISHED)
    lengths = [
        (t.datetime_complete - t.datetime_start).total_seconds()
        for t in finished
        if t.datetime_start and t.datetime_complete
    ]
    if not lengths:  # none finished yet: a running trial's whole length, as its pace foresees
        lengths = [
            now - t.datetime_start.timestamp() + eta
            for t, eta in zip(running, etas, strict=True)
            if eta is not None and t.datetime_start
        ]
    trial_seconds = statistics.fmean(lengths) if lengths else None
    left = max(n_trials - len(finished) - len(running), 0)
    return finish_in(etas, left, trial_seconds)


def _trial_eta(trial: FrozenTrial, now: float) -> float | None:
    progress = trial.user_attrs.get(PROGRESS_ATTR) or {}
    if "eta_seconds" not in progress:
        return None
    said_at = progress.get("at", now)  # a trial from before "at" was recorded: as of now
    return max(float(progress["eta_seconds"]) - max(now - said_at, 0.0), 0.0)


def estimate_check(study: optuna.Study, spec: StudySpec) -> list[dict]:
    """Per choice that ``hpo validate --estimate`` timed for ``spec`` (with the settings the
    study runs; ``params``: the encoder, formulation and long-text handling it had): the
    estimated seconds per epoch beside the median that the complete trials with those
    parameters measured (training and validation, setup left out), where any did."""
    record = read_estimate(spec)
    choices = record.get("choices") if record else None
    if not choices:
        return []
    measured: dict[int, list[float]] = {}
    for trial in completed_trials(study):
        attrs = trial.user_attrs
        if not (attrs.get(EPOCHS_RUN_ATTR) and WALL_SECONDS_ATTR in attrs):
            continue
        spent = attrs[WALL_SECONDS_ATTR] - attrs.get(SETUP_SECONDS_ATTR, 0.0)
        seconds = spent / attrs[EPOCHS_RUN_ATTR]
        for index, timed in enumerate(choices):
            if all(trial.params.get(k, spec.train.get(k)) == v for k, v in timed["params"].items()):
                measured.setdefault(index, []).append(seconds)
    return [
        {
            "params": timed["params"],
            "estimated_epoch_s": timed["epoch_s"],
            "threads": timed.get("threads"),
            "measured_epoch_s": statistics.median(measured[index]),
            "trials": len(measured[index]),
        }
        for index, timed in enumerate(choices)
        if index in measured
    ]
