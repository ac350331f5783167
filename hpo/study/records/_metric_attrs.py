"""A trial's validation metrics as one user attribute each (``metric:macro_f1`` = 0.6123):
optuna-dashboard shows each on a line of its own and as a sortable column of its trials table,
where one JSON attribute of a dozen metrics ran past the page's right edge."""

from __future__ import annotations

from collections.abc import Mapping

from optuna.trial import FrozenTrial

from hpo.attributes import METRIC_PREFIX

DECIMALS = 4  # as every figure hpo prints; the value itself keeps full precision


def metric_attrs(metrics: Mapping[str, float]) -> dict[str, float]:
    """The user attributes that record ``metrics``, by name, rounded."""
    return {f"{METRIC_PREFIX}{name}": round(value, DECIMALS) for name, value in metrics.items()}


def trial_metrics(trial: FrozenTrial) -> dict[str, float]:
    """The validation metrics a trial recorded (empty for a pruned or failed one), from its
    per-metric attributes."""
    return recorded_metrics(trial.user_attrs)


def recorded_metrics(user_attrs: Mapping[str, object]) -> dict[str, float]:
    """``trial_metrics`` from a trial's user attributes."""
    return {
        key.removeprefix(METRIC_PREFIX): value
        for key, value in user_attrs.items()
        if key.startswith(METRIC_PREFIX)
    }
