"""What the CLI shows of a study: its best trial (with a checkpoint only if it is that trial's)
and its status (counts, pace, ETA, the time budget, where each running trial is); and of a
storage, its studies."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import optuna

from hpo.attributes import (
    CHECKPOINT_ATTR,
    FINAL_ATTR,
    INTERVAL_ATTR,
    METRIC_ATTR,
    N_TRIALS_ATTR,
    PROGRESS_ATTR,
    TASK_ATTR,
    WORKER_ATTR,
)
from hpo.outputs import UID_DIGITS, recorded_owner
from hpo.spec import HeartbeatSpec, SpecError
from hpo.storage_url import StorageUrl
from hpo.study._timing import estimate_check, study_eta_seconds
from hpo.study.records._census import TrialCounts, state_counts, trial_census, trials_per_hour
from hpo.study.records._find import recorded_spec, sqlite_file_exists, study_uid
from hpo.study.records._metric_attrs import trial_metrics
from hpo.study.records._trials import best_full_trial, completed_trials, running_trials
from hpo.study.search._budget import study_deadline
from hpo.study.search._fidelity import fidelity_words, study_fidelity
from hpo.study.storage._connect import get_storage
from hpo.study.storage._heartbeat import stale_trials


@dataclass(frozen=True)
class BestTrial:
    """A study's best trial as ``hpo best`` and the end of ``hpo tune`` show it."""

    number: int
    metric: str  # the study's, or "value" for a study hpo did not create
    value: float
    interval: dict | None  # level, low, high and posts: over the validation posts
    params: dict[str, object]
    metrics: dict[str, float]  # the study's metric first
    checkpoint: str | None  # None: none recorded, gone, or refused
    checkpoint_refused: str | None  # why an existing checkpoint is not this trial's
    spread: list[dict]  # how far the value moves with the seed, where the study shows it


@dataclass(frozen=True)
class StudyListing:
    """A study as ``hpo status`` lists it among the storage's others."""

    study: str
    counts: TrialCounts  # best None: no single best


@dataclass(frozen=True)
class StudyStatus:
    """A study as ``hpo status`` shows it."""

    study: str
    task: str
    # where a low fidelity stands: checking it, screening with it, or full trials only
    fidelity: str | None
    direction: str
    metric: str
    n_trials: int | None
    counts: TrialCounts
    trials_per_hour: float | None
    eta_hours: float | None
    estimate: list[dict]  # hpo validate --estimate against the trials' epochs
    running: list[dict]  # number, worker, progress, silent_seconds (None: beating)
    budget_seconds_left: float | None  # None: no time budget


def best_trial(study) -> BestTrial | None:
    """The best trial's number, value, parameters, metrics and checkpoint (if it still exists
    and is this trial's); ``checkpoint_refused`` says why an existing one is not shown."""
    trial = best_full_trial(study)
    if trial is None:
        return None
    checkpoint = trial.user_attrs.get(CHECKPOINT_ATTR)
    if not checkpoint or not Path(checkpoint).exists():
        checkpoint = None
    refused = _foreign_checkpoint(study, trial.number, checkpoint) if checkpoint else None
    return BestTrial(
        number=trial.number,
        metric=study.user_attrs.get(METRIC_ATTR, "value"),
        value=trial.value,
        interval=trial.user_attrs.get(INTERVAL_ATTR),
        params=dict(trial.params),
        metrics=_metric_first(trial_metrics(trial), study.user_attrs.get(METRIC_ATTR)),
        checkpoint=None if refused else checkpoint,
        checkpoint_refused=refused,
        spread=_spreads(study, trial),
    )


def interval_words(best: BestTrial) -> str:
    """``, 95% CI 0.4100-0.6600 over 30 validation posts``, where the trial recorded one."""
    interval = best.interval
    if not interval:
        return ""
    return (
        f", {interval['level']:.0%} CI {interval['low']:.4f}-{interval['high']:.4f} over "
        f"{interval['posts']} validation posts"
    )


def _metric_first(metrics: dict[str, float], metric: str | None) -> dict[str, float]:
    """The study's metric, then the others by name: storages return attributes in no order
    of ours."""
    return dict(sorted(metrics.items(), key=lambda item: (item[0] != metric, item[0])))


def _spreads(study, best) -> list[dict]:
    """How far the best value moves with the seed, where the study shows it: finalize's seeds
    of the best trial's configuration and of the one finalize chose (the best mean over seeds,
    which need not be the best single trial), and completed trials that re-ran the best
    trial's parameters."""
    found = []
    metric = study.user_attrs.get(METRIC_ATTR, "value")
    final = study.user_attrs.get(FINAL_ATTR) or {}
    by_trial = final.get(f"validation_{metric}_seeds_by_trial") or {}
    if (values := by_trial.get(str(best.number))) and final["trial"] != best.number:
        found.append(_spread("finalize's seeds", best.number, values))
    if values := final.get(f"validation_{metric}_seeds"):
        found.append(_spread("finalize's seeds; finalize chose it", final["trial"], values))
    repeats = [t for t in completed_trials(study) if t.params == best.params]
    if len(repeats) > 1:
        found.append(
            _spread(
                f"trials {', '.join(str(t.number) for t in repeats)}: same parameters",
                best.number,
                [t.value for t in repeats],
            )
        )
    return found


def _spread(source: str, trial: int, values: list[float]) -> dict:
    return {
        "source": source,
        "trial": trial,  # whose configuration
        "n": len(values),
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


def _foreign_checkpoint(study, number: int, checkpoint: str) -> str | None:
    """Why ``checkpoint`` is not trial ``number``'s of ``study``, or None if it is.

    Its folder's metrics.json must name this study's uid and this trial: a study of the
    same name elsewhere (another storage, or deleted and re-created) may have written
    the folder since, and its weights would be shown beside these parameters.
    """
    uid = study_uid(study)
    owner_uid, owner_trial = recorded_owner(checkpoint)
    if uid is not None and (owner_uid, owner_trial) == (uid, number):
        return None
    if owner_uid is None:
        return (
            f"the checkpoint at {checkpoint} is not recorded as this study's "
            "(no study uid in its metrics.json); not shown"
        )
    if owner_uid != uid:
        return (
            f"the checkpoint at {checkpoint} belongs to another study "
            f"(its metrics.json names study {str(owner_uid)[:UID_DIGITS]}); not shown"
        )
    return (
        f"the checkpoint at {checkpoint} belongs to trial {owner_trial}, not trial {number}; "
        "not shown"
    )


def study_status(study) -> StudyStatus:
    """Counts by state, the best value, the pace and what remains (the ETA from the running
    trials' own), where each running trial is (``silent_seconds``: how long a stale one has
    not beaten), and how close ``hpo validate --estimate`` came."""
    counts = state_counts(study)
    n_trials = study.user_attrs.get(N_TRIALS_ATTR)
    try:
        spec = recorded_spec(study)
    except SpecError:  # recorded by an hpo whose specs this one no longer reads, or edited
        spec = None
    # RUNNING in the database, but no worker beats them: their progress is their last words
    stale = stale_trials(study, (spec.heartbeat if spec else HeartbeatSpec()).grace_period)
    live = counts.running > len(stale)
    eta = study_eta_seconds(study, n_trials) if live else None
    running = [
        {
            "number": t.number,
            "worker": t.user_attrs.get(WORKER_ATTR),
            **t.user_attrs.get(PROGRESS_ATTR, {}),
            "silent_seconds": stale.get(t.number),  # None: its heartbeat is on time
        }
        for t in running_trials(study)
    ]
    check = study_fidelity(study, spec) if spec else None
    deadline = study_deadline(study)
    return StudyStatus(
        study=study.study_name,
        task=study.user_attrs.get(TASK_ATTR, "?"),
        fidelity=fidelity_words(check, spec.fidelity) if check else None,
        direction=study.direction.name.lower(),
        metric=study.user_attrs.get(METRIC_ATTR, "value"),
        n_trials=n_trials,
        counts=counts,
        trials_per_hour=trials_per_hour(study),
        eta_hours=None if eta is None else eta / 3600,
        estimate=estimate_check(study, spec) if spec else [],
        running=running,
        budget_seconds_left=None if deadline is None else deadline - time.time(),
    )


def study_summaries(storage_url: StorageUrl | str) -> list[StudyListing]:
    """Every study in the storage, oldest first: its name, trial counts by state and best value
    (``hpo status`` without a study name)."""
    url = StorageUrl.of(storage_url)
    if not sqlite_file_exists(url):
        return []  # listing must not create the database it lists
    storage = get_storage(url)
    summaries = []
    for name in optuna.get_all_study_names(storage):
        try:
            study = optuna.load_study(study_name=name, storage=storage)
        except KeyError:  # deleted since it was listed
            continue
        if len(study.directions) == 1:
            counts = state_counts(study)
        else:  # not one of hpo's: Optuna has no single best value for it
            counts = TrialCounts.from_census(trial_census(study))
        summaries.append(StudyListing(name, counts))
    return summaries
