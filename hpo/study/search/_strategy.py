"""How a ``sampler: {name: auto}`` study spends its budget, decided once when it is created.

A budget that buys few full trials is not spent on TPE's random startup (ten random trials by
default): the study runs its warm start, then a small portfolio around it
(``hpo.study.search._portfolio``), sampled on by Optuna's GPSampler, which models from the second
finished trial; TPE takes over at ``handover(spec)`` finished trials, where its own model has
enough trials to go on. A budget that buys that many or more runs TPE from the first trial:
its random startup is then a small share of the search, and TPE handles a conditional space
(GP samples conditional parameters at random) at a cost per trial that grows only linearly.

The budget in full trials is ``n_trials``, or fewer where ``timeout`` over the trial cost that
``hpo validate --estimate`` measured (recorded in a small JSON under ``output_dir``) buys fewer.
A timeout with no measured cost counts as few trials (see ``plan_search``); with neither, the
decision comes from ``n_trials`` alone. The plan says which.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import optuna

from hpo.attributes import PLAN_ATTR, PORTFOLIO_ATTR, RUNS_TO_END_ATTR
from hpo.outputs import atomic_text
from hpo.spec import StudySpec
from hpo.study.records._notes import spelled_duration
from hpo.study.records._trials import enqueue
from hpo.study.search._portfolio import portfolio_points, runs_to_end
from hpo.study.search._sampler import StagedSampler

# Optuna's sampler table recommends GPSampler for 10-100 trials and TPE for 100-1000; a GP
# wants about ten trials per searched dimension to model the space as a whole (the 10d rule
# of thumb for initial designs), and its cost grows with the cube of the trials.
TRIALS_PER_DIMENSION = 10
GP_MAX_TRIALS = 100
# GP fits its model from this many complete trials (Optuna's default waits for 10, at random)
GP_STARTUP_TRIALS = 2
ESTIMATE_DIR = "estimates"  # under output_dir: <study name>.json from hpo validate --estimate


@dataclass(frozen=True)
class SearchPlan:
    strategy: str  # "portfolio": warm start, portfolio, GP, then TPE; "tpe": TPE throughout
    budget_trials: int | None  # full trials the budget buys (None: a timeout, cost unknown)
    basis: str  # where that number comes from, in words
    handover: int  # finished trials from which TPE samples in an auto study (handover())
    tpe_startup: int  # TPE's random startup trials
    warm_start: int  # the spec's warm-start points
    portfolio: tuple[tuple[str, dict], ...] = ()  # (label, point), in the order they run

    @property
    def gp_until(self) -> int:
        """Finished trials at which this study hands over to TPE (0: TPE from the first)."""
        return self.handover if self.strategy == "portfolio" else 0

    def describe(self) -> list[str]:
        """The plan in a line or two, as ``hpo validate`` prints it."""
        if self.budget_trials is None:
            bought = (
                f"strategy: {self.basis} is taken as fewer than {self.handover} full trials, "
                "the safe side"
            )
        else:
            bought = f"strategy: the budget buys ~{self.budget_trials} full trials ({self.basis})"
        if self.strategy == "tpe":
            return [
                f"{bought}, at least {self.handover}: TPE from the first trial (its "
                f"{self.tpe_startup} random startup trials a small share of them)"
            ]
        if self.budget_trials is not None:
            bought += f", fewer than {self.handover}"
        first = (
            f"the warm start, a portfolio of {len(self.portfolio)} around it, then "
            if self.warm_start
            else ""
        )
        lines = [
            f"{bought}: {first}GPSampler (TPE would spend its first "
            f"{self.tpe_startup} at random) until {self.handover} finished trials, then TPE"
        ]
        if self.portfolio:
            lines.append("  portfolio: " + "; ".join(label for label, _ in self.portfolio))
        elif not self.warm_start:
            lines.append("  portfolio: none, as the spec has no warm_start to build one around")
        return lines

    def to_attr(self) -> dict:
        """The plan as the study records it (the workers' samplers read ``gp_until``)."""
        return {
            "strategy": self.strategy,
            "budget_trials": self.budget_trials,
            "basis": self.basis,
            "gp_until": self.gp_until,
            "portfolio": [label for label, _ in self.portfolio],
        }


def handover(spec: StudySpec) -> int:
    """Finished trials at which an ``auto`` study hands over from GP to TPE: ten per searched
    parameter up to GP's recommended 100, and never before TPE's own random startup is over
    (so TPE models from its first trial)."""
    return max(
        _tpe_startup(spec), min(TRIALS_PER_DIMENSION * len(spec.search_space), GP_MAX_TRIALS)
    )


def _tpe_startup(spec: StudySpec) -> int:
    default = inspect.signature(optuna.samplers.TPESampler).parameters["n_startup_trials"]
    return int(spec.sampler.options.get("n_startup_trials", default.default))


def plan_search(
    spec: StudySpec, trial_seconds: float | None = None, workers: int = 1
) -> SearchPlan:
    """The plan of an ``auto`` study (pure): ``trial_seconds`` is one full trial's estimated
    cost, ``workers`` the trials run at a time that estimate assumed."""
    until = handover(spec)
    budget, basis = spec.n_trials, f"n_trials {spec.n_trials}"
    if spec.timeout and trial_seconds:
        bought = max(int(spec.timeout * workers // trial_seconds), 1)
        if bought < budget:
            budget, basis = (
                bought,
                f"timeout {spelled_duration(spec.timeout)} x {workers} "
                f"worker{'s' * (workers > 1)} / {spelled_duration(trial_seconds)} a trial, "
                "from hpo validate --estimate",
            )
    elif spec.timeout:
        # A timeout with no measured trial cost is taken as few trials, the safe side: if trials
        # turn out cheap, the portfolio and GP cost a few of them and TPE still takes over at the
        # handover; if they turn out dear, TPE's random start would be the whole budget (#35).
        budget = None
        basis = (
            f"a timeout of {spelled_duration(spec.timeout)} with no trial cost measured "
            "(hpo validate --estimate)"
        )
    known = (budget, basis, until, _tpe_startup(spec), len(spec.warm_start))
    if budget is not None and budget >= until:
        return SearchPlan("tpe", *known)
    # the portfolio never outgrows the budget
    room = max((spec.n_trials if budget is None else budget) - len(spec.warm_start), 0)
    return SearchPlan("portfolio", *known, tuple(portfolio_points(spec)[:room]))


def start_plan(study: optuna.Study, spec: StudySpec) -> SearchPlan:
    """At creation, after the warm start: queue the portfolio (each trial names its move in
    the ``portfolio`` user attribute; a move to another kind of model runs to its end) and
    record the plan, which every worker's sampler reads."""
    plan = recorded_plan(spec)
    for label, point in plan.portfolio:
        attrs: dict[str, object] = {PORTFOLIO_ATTR: label}
        if runs_to_end(spec, point):
            attrs[RUNS_TO_END_ATTR] = "another kind of model than the warm start: no look part-way"
        enqueue(study, spec, point, user_attrs=attrs)
    study.set_user_attr(PLAN_ATTR, plan.to_attr())
    return plan


def recorded_plan(spec: StudySpec) -> SearchPlan:
    """The plan with the trial cost ``hpo validate --estimate`` recorded, if any."""
    return plan_search(spec, *(read_trial_cost(spec) or (None, 1)))


def estimate_path(spec: StudySpec) -> Path:
    return Path(spec.output_dir) / ESTIMATE_DIR / f"{spec.name}.json"


def record_trial_cost(
    spec: StudySpec, trial_seconds: float, workers: int, choices: list[dict] | None = None
) -> Path:
    """Keep ``hpo validate --estimate``'s cost of one full trial for the study's creation, and
    each timed choice's epoch (``[{"params": {"encoder": ..., "criteria_formulation": ...},
    "epoch_s": ..., "threads": ...}]``) for ``hpo status`` to set beside the epochs the trials
    with those parameters measure."""
    path = estimate_path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "trial_s": trial_seconds,
        "workers": workers,
        "choices": choices or [],
        "settings": _settings_hash(spec),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with atomic_text(path) as stream:  # whole or not at all, never over an input or a database
        stream.write(json.dumps(record, indent=1) + "\n")
    return path


def read_trial_cost(spec: StudySpec) -> tuple[float, int] | None:
    """(seconds per full trial, workers) as recorded for this spec's search space and training
    settings; None when there is none, or it was measured for other settings (a stale cost
    would mislead the decision)."""
    record = read_estimate(spec)
    try:
        return None if record is None else (float(record["trial_s"]), int(record["workers"]))
    except (ValueError, KeyError, TypeError):
        return None


def read_estimate(spec: StudySpec) -> dict | None:
    """The record ``record_trial_cost`` kept for this spec's search space and training
    settings; None when there is none or it was made for other settings."""
    try:
        record = json.loads(estimate_path(spec).read_text())
        return record if record["settings"] == _settings_hash(spec) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _settings_hash(spec: StudySpec) -> str:
    """What a trial's cost depends on: the fixed training settings, the search space, the data
    and encoders it read, and the machine it ran on (issue #55: a cost timed for one encoder
    was reused for a study of another)."""
    settings = {
        "data_dir": str(Path(spec.data_dir).resolve()),
        "model_paths": dict(spec.model_paths),
        "machine": [platform.node(), os.cpu_count()],
        "train": spec.train,
        "search_space": {name: p.model_dump(mode="json") for name, p in spec.search_space.items()},
        "warm_start": list(spec.warm_start),
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[
        :12
    ]


def staged_sampler(
    spec: StudySpec, tpe: optuna.samplers.BaseSampler, seed: int | None
) -> StagedSampler:
    """An ``auto`` study's sampler: GPSampler (modelling from its second complete trial, not
    after ten random ones; conditional parameters, which it samples at random by design,
    without a warning per trial) until the study's plan hands over to ``tpe``."""
    gp = optuna.samplers.GPSampler(
        seed=seed, n_startup_trials=GP_STARTUP_TRIALS, warn_independent_sampling=False
    )
    return StagedSampler(gp, tpe, gp_until=handover(spec))
