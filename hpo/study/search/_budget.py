"""A study's wall-clock budget: one deadline in the study, so workers on every machine stop
by the same clock, and what a trial typically takes, to start none the budget cannot fit."""

from __future__ import annotations

import statistics
import time

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.attributes import DEADLINE_ATTR, EPOCHS_RUN_ATTR, TRAIN_SHARE_ATTR, WALL_SECONDS_ATTR


def start_time_budget(study: optuna.Study, seconds: float | None) -> float | None:
    """Give the study ``seconds`` from now (None: no budget, and any earlier one is lifted)."""
    deadline = None if seconds is None else time.time() + seconds
    study.set_user_attr(DEADLINE_ATTR, deadline)
    return deadline


def study_deadline(study: optuna.Study) -> float | None:
    return study.user_attrs.get(DEADLINE_ATTR)


def _full_runs(study: optuna.Study, states: tuple[TrialState, ...]) -> list[FrozenTrial]:
    """The study's timed full runs in ``states``: a run screened on a share of the training
    posts is faster, and would price the next trial, which may be a full run, too low."""
    return [
        t
        for t in study.get_trials(deepcopy=False, states=states)
        if WALL_SECONDS_ATTR in t.user_attrs and TRAIN_SHARE_ATTR not in t.user_attrs
    ]


def median_trial_seconds(study: optuna.Study) -> float | None:
    """The median wall time of the study's completed full runs; None before the first."""
    seconds = [t.user_attrs[WALL_SECONDS_ATTR] for t in _full_runs(study, (TrialState.COMPLETE,))]
    return statistics.median(seconds) if seconds else None


def median_epoch_seconds(study: optuna.Study) -> float | None:
    """The median pace of the study's finished full runs, pruned ones too: wall seconds per
    epoch run (start-up included, so a little slow); None before one has run a whole epoch."""
    paces = [
        t.user_attrs[WALL_SECONDS_ATTR] / t.user_attrs[EPOCHS_RUN_ATTR]
        for t in _full_runs(study, (TrialState.COMPLETE, TrialState.PRUNED))
        if t.user_attrs.get(EPOCHS_RUN_ATTR, 0) >= 1
    ]
    return statistics.median(paces) if paces else None


def time_budget_spent(
    study: optuna.Study, deadline: float | None, first_look: float | None = None
) -> str | None:
    """Why no trial may start now (None: one may). With a rung pruner (``first_look``: the
    epochs a trial trains before the pruner first judges it), the time left must fit that much
    training at the study's median pace: a trial the budget then cuts short ends at its next
    epoch's end and is kept with its best epoch, so a budget's tail buys first looks instead of
    idle workers (on the real job, 26 of 60 minutes went unused for want of a whole trial).
    Without one, it must fit the study's median finished trial. With no finished trial yet,
    only a passed deadline stops."""
    if deadline is None:
        return None
    left = deadline - time.time()
    pace = median_epoch_seconds(study) if first_look is not None else None
    if pace is not None:
        need = first_look * pace
        if left > need:
            return None
        return (
            f"the time budget has {max(left, 0):.0f}s left, less than a trial takes to its "
            f"first judgement ({need:.0f}s: {first_look:g} epochs at the median {pace:.0f}s each)"
        )
    typical = median_trial_seconds(study)
    if left > (typical or 0):
        return None
    return (
        f"the time budget has {max(left, 0):.0f}s left, less than a trial takes "
        f"({typical or 0:.0f}s, the median)"
    )
