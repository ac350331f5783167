"""A study's wall-clock budget: one deadline in the study, so workers on every machine stop
by the same clock, and what a trial typically takes, to start none the budget cannot fit."""

from __future__ import annotations

import statistics
import time

import optuna
from optuna.trial import TrialState

# epoch seconds; set when `hpo tune --timeout` starts the study's workers
DEADLINE_ATTR = "deadline"


def start_time_budget(study: optuna.Study, seconds: float | None) -> float | None:
    """Give the study ``seconds`` from now (None: no budget, and any earlier one is lifted)."""
    deadline = None if seconds is None else time.time() + seconds
    study.set_user_attr(DEADLINE_ATTR, deadline)
    return deadline


def study_deadline(study: optuna.Study) -> float | None:
    return study.user_attrs.get(DEADLINE_ATTR)


def median_trial_seconds(study: optuna.Study) -> float | None:
    """The median wall time of the study's completed trials; None before the first."""
    seconds = [
        t.user_attrs["wall_seconds"]
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if "wall_seconds" in t.user_attrs
    ]
    return statistics.median(seconds) if seconds else None


def time_budget_spent(study: optuna.Study, deadline: float | None) -> str | None:
    """Why no trial may start now (None: one may): the time budget left is shorter than the
    study's median finished trial (with none finished yet, only a passed deadline stops)."""
    if deadline is None:
        return None
    left = deadline - time.time()
    typical = median_trial_seconds(study)
    if left > (typical or 0):
        return None
    return (
        f"the time budget has {max(left, 0):.0f}s left, less than a trial takes "
        f"({typical or 0:.0f}s, the median)"
    )
