"""Screening at a low fidelity, and the check that earns it (spec ``fidelity``).

A low-fidelity run is a complete training (its own warm-up and decay) on a share of the
training posts; a look in the middle of a long schedule is not one (bench pruning_regret).
The study relies on it only after proving it on the user's own data: the first ``check``
full trials each get a low-fidelity twin with the same parameters, and once they have all
finished, the Spearman correlation of the twins' values with the full runs' decides. At
``min_rank_correlation`` or above, later sampled trials are screened at the low fidelity and
the best of them (ASHA's rule: the top ``promote`` share of the screened so far) are queued
again as full runs; below it, or where it cannot be computed, every trial stays a full run, so
a shortcut that ranks badly costs the check and nothing else. Check trials are never pruned: a
pruned full run has no final value to rank by.

Each decision is taken from the trials themselves under the study's trial-start lock, so
workers on several machines agree without a coordinator; the outcome is also recorded on the
study (``fidelity_check``) for ``hpo status`` and the dashboard note.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Literal

import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from hpo.attributes import (
    CHECKED_ATTR,
    FIDELITY_CHECK_ATTR,
    PROMOTED_FROM_ATTR,
    RUNS_TO_END_ATTR,
    STOPPED_BY_ATTR,
    TRAIN_SHARE_ATTR,
    TWIN_OF_ATTR,
)
from hpo.spec import FidelitySpec, StudySpec
from hpo.study.records import trial_start, write_study_note

Phase = Literal["checking", "screening", "full"]
FULL = 1.0
_OPEN = (TrialState.RUNNING, TrialState.WAITING)


@dataclass(frozen=True)
class FidelityCheck:
    """Where a study's low fidelity stands, read from its trials."""

    phase: Phase
    pairs: tuple[tuple[float, float], ...]  # (low, full) values of the finished check configs
    rank_correlation: float | None  # Spearman over ``pairs``; None before they all finished
    live: int  # check configurations that have completed both runs or still can
    screened: int  # completed low-fidelity runs outside the check
    promoted: int  # full runs queued for screened configurations

    def to_attr(self, fidelity: FidelitySpec) -> dict:
        return {
            "phase": self.phase,
            "pairs": len(self.pairs),
            "rank_correlation": _rounded(self.rank_correlation),
            "min_rank_correlation": fidelity.min_rank_correlation,
            "train_share": fidelity.train_share,
        }


def fidelity_check(trials: list[FrozenTrial], fidelity: FidelitySpec) -> FidelityCheck:
    """The check's state over ``trials`` (pure): which phase, on which pairs."""
    checks: dict[int, dict[str, list[FrozenTrial]]] = {}
    for trial in trials:
        attrs = trial.user_attrs
        if TRAIN_SHARE_ATTR in attrs and not _low_at_share(trial, fidelity):
            continue  # a share the spec has since changed proves nothing
        # keyed by the check's first full trial: a queued trial shows no parameters yet
        if TWIN_OF_ATTR in attrs:
            checks.setdefault(attrs[TWIN_OF_ATTR], {"low": [], "full": []})["low"].append(trial)
        elif CHECKED_ATTR in attrs:
            checks.setdefault(_origin(trial), {"low": [], "full": []})["full"].append(trial)
    pairs, live = [], 0
    for runs in checks.values():
        low, full = _final_value(runs["low"]), _final_value(runs["full"])
        if low is not None and full is not None:
            pairs.append((low, full))
        if _can_finish(runs["low"], low) and _can_finish(runs["full"], full):
            live += 1
    screened = sum(
        1
        for t in trials
        if _low_at_share(t, fidelity) and not _is_twin(t) and t.state == TrialState.COMPLETE
    )
    promoted = len({t.user_attrs[PROMOTED_FROM_ATTR] for t in trials if _is_promotion(t)})
    rho = None
    if len(pairs) >= fidelity.check and live == len(pairs):  # every live check has finished
        rho = spearman([low for low, _ in pairs], [full for _, full in pairs])
    if rho is None:
        phase: Phase = "checking"
    else:  # NaN (a fidelity that scores every configuration alike) ranks nothing: full trials
        phase = "screening" if rho >= fidelity.min_rank_correlation else "full"
    return FidelityCheck(phase, tuple(pairs), rho, live, screened, promoted)


def start_fidelity(trial: optuna.Trial, spec: StudySpec) -> float:
    """The share of the training posts ``trial`` trains on (1.0: a full run), decided when it
    starts and recorded on it; a check trial's low-fidelity twin is queued here."""
    fidelity = spec.fidelity
    attrs = trial.user_attrs
    if fidelity is None:
        return FULL
    if TRAIN_SHARE_ATTR in attrs:  # a twin, or the retry of a screened run
        return float(attrs[TRAIN_SHARE_ATTR])
    if PROMOTED_FROM_ATTR in attrs or CHECKED_ATTR in attrs:
        return FULL
    study = trial.study
    with trial_start(study) as census:
        check = fidelity_check(study.get_trials(deepcopy=False), fidelity)
        _record(study, spec, check)
        if check.phase == "screening":
            trial.set_user_attr(TRAIN_SHARE_ATTR, fidelity.train_share)
            return fidelity.train_share
        if check.phase == "checking" and check.live < fidelity.check and _room(census, spec):
            trial.set_user_attr(CHECKED_ATTR, True)
            study.enqueue_trial(
                dict(trial.params),  # sampled before the fidelity is asked for: see suggest
                user_attrs={TRAIN_SHARE_ATTR: fidelity.train_share, TWIN_OF_ATTR: trial.number},
            )
    return FULL


def promote(trial: optuna.Trial, spec: StudySpec, value: float) -> list[int]:
    """After a screened run scored ``value``: queue a full run of every screened configuration
    now in the top ``promote`` share of the screened values (ASHA: one screened early enters it
    once enough worse ones follow) that has none yet; returns the screened trials promoted."""
    fidelity, study = spec.fidelity, trial.study
    if fidelity is None or TRAIN_SHARE_ATTR not in trial.user_attrs or _is_twin(trial):
        return []
    promoted = []
    with trial_start(study) as census:
        trials = study.get_trials(deepcopy=False)
        if fidelity_check(trials, fidelity).phase != "screening":
            return []
        scored = [
            (t.value, t.number, t.params)
            for t in trials
            if _low_at_share(t, fidelity) and t.state == TrialState.COMPLETE
        ]
        scored.append((value, trial.number, dict(trial.params)))
        scored.sort(key=lambda s: s[0], reverse=spec.direction == "maximize")
        # configurations with a full run: started ones show their parameters; a queued
        # promotion shows only whom it promotes
        has_full = {
            _config_key(t.params)
            for t in trials
            if TRAIN_SHARE_ATTR not in t.user_attrs and t.state != TrialState.WAITING
        }
        promoted_before = {t.user_attrs[PROMOTED_FROM_ATTR] for t in trials if _is_promotion(t)}
        # ceil: the first screened runs already compete for a place (ASHA's floor would promote
        # none of the first two at a third), as bench fidelity_rank replays it
        for _, number, params in scored[: math.ceil(len(scored) * fidelity.promote)]:
            if number in promoted_before or _config_key(params) in has_full:
                continue
            if not _room(census, spec, len(promoted)):
                break
            study.enqueue_trial(params, user_attrs={PROMOTED_FROM_ATTR: number})
            has_full.add(_config_key(params))
            promoted.append(number)
    return promoted


def is_unprunable(trial: optuna.Trial) -> bool:
    """A check's full run or any low-fidelity run, which must reach its end to be compared, a
    promoted full run: its configuration earned it by a complete run, and a look inside its
    long schedule would judge it worse than that did (bench pruning_regret), or a portfolio move
    to another kind of model (``runs_to_end``: its curve rises later than the recipe's)."""
    attrs = trial.user_attrs
    return any(
        key in attrs
        for key in (CHECKED_ATTR, TRAIN_SHARE_ATTR, PROMOTED_FROM_ATTR, RUNS_TO_END_ATTR)
    )


def study_fidelity(study: optuna.Study, spec: StudySpec) -> FidelityCheck | None:
    """The check as ``hpo status`` shows it; None for a study without a fidelity section."""
    if spec.fidelity is None:
        return None
    return fidelity_check(study.get_trials(deepcopy=False), spec.fidelity)


def fidelity_words(check: FidelityCheck, fidelity: FidelitySpec) -> str:
    """One line: what the low fidelity is, and what the check decided."""
    low = f"{fidelity.train_share:.0%} of the training posts"
    if check.phase == "checking":
        return (
            f"checking a low fidelity ({low}): {len(check.pairs)} of {fidelity.check} "
            "configurations finished at both fidelities"
        )
    measured = (
        f"rank correlation {check.rank_correlation:.2f} over {len(check.pairs)} configurations"
        if not math.isnan(check.rank_correlation)
        else f"no rank correlation (the low fidelity scored all {len(check.pairs)} alike)"
    )
    if check.phase == "screening":
        return (
            f"screening at {low}: {measured} (at least {fidelity.min_rank_correlation:g}); "
            f"{check.screened} screened, {check.promoted} promoted to full runs"
        )
    return (
        f"full trials only: the low fidelity ({low}) ranked badly, {measured} "
        f"(below {fidelity.min_rank_correlation:g})"
    )


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (ties averaged); NaN where either side is constant."""
    if len(set(a)) < 2 or len(set(b)) < 2:
        return math.nan
    from scipy.stats import spearmanr  # scipy comes with scikit-learn; imported only here

    return float(spearmanr(a, b).statistic)


def _record(study: optuna.Study, spec: StudySpec, check: FidelityCheck) -> None:
    """Keep the decided check on the study, and in its dashboard note, once it changes."""
    if check.phase == "checking":
        return
    attr = check.to_attr(spec.fidelity)
    if study.user_attrs.get(FIDELITY_CHECK_ATTR) != attr:
        study.set_user_attr(FIDELITY_CHECK_ATTR, attr)
        write_study_note(study, spec)


def _room(census: dict, spec: StudySpec, queued: int = 0) -> bool:
    """Whether one more queued trial stays within ``n_trials``."""
    taken = census["finished"] + census["running"] + census["waiting"] + queued
    return taken < spec.n_trials


def _final_value(runs: list[FrozenTrial]) -> float | None:
    """The first completed run's value; a run the study's time budget cut short is no full
    run."""
    for t in sorted(runs, key=lambda t: t.number):
        if t.state == TrialState.COMPLETE and STOPPED_BY_ATTR not in t.user_attrs:
            return t.value
    return None


def _can_finish(runs: list[FrozenTrial], value: float | None) -> bool:
    return value is not None or any(t.state in _OPEN for t in runs)


def _low_at_share(trial: FrozenTrial, fidelity: FidelitySpec) -> bool:
    """Whether ``trial`` is a low-fidelity run at the spec's ``train_share``: a study resumed
    with another share proves and screens at the new one afresh."""
    share = trial.user_attrs.get(TRAIN_SHARE_ATTR)
    return share is not None and math.isclose(share, fidelity.train_share)


def _is_promotion(trial: FrozenTrial) -> bool:
    return PROMOTED_FROM_ATTR in trial.user_attrs


def _origin(trial: FrozenTrial) -> int:
    """The number of the trial that ``trial`` retries (itself where it is no retry)."""
    history = RetryHeartbeatStaleTrialCallback.retry_history(trial)
    return history[0] if history else trial.number


def _is_twin(trial: optuna.Trial | FrozenTrial) -> bool:
    return TWIN_OF_ATTR in trial.user_attrs


def _config_key(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def _rounded(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else round(value, 4)
