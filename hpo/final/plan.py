"""What finalize will do, decided and said before anything trains: the study's best distinct
configurations, the seeds each is retrained with (and the one a trial's kept checkpoint
already is, which is not), and what becomes of them. And, for a finalize already done,
whether the search has found better since."""

from __future__ import annotations

import dataclasses
import json

from hpo.attributes import SEED_ATTR
from hpo.errors import UsageError
from hpo.final.retrain import Run, train_config
from hpo.final.reuse import judge
from hpo.final.summary import FinalSummary, Settings
from hpo.spec import StudySpec
from hpo.study.records import completed_trials, study_uid
from hpo.vocabulary import REFIT_WITH_VALIDATION, Threshold, ThresholdRule

# How the decision thresholds are chosen (hpo.vocabulary.ThresholdRule), decided from the flags
# before anything is trained (so no look at validation or test can pick the rule): out_of_fold
# with --cv K (every train + validation post, scored by a model that did not train on it),
# validation with the spec's threshold: tuned and no --cv (the search's own choice), fixed (0.5
# everywhere) otherwise. How the plan names each:
RULE_PLAN: dict[ThresholdRule, str] = {
    "fixed": "0.5 for every symptom",
    "validation": "per symptom, tuned on the validation split (the spec's threshold: tuned)",
    "out_of_fold": "per symptom, chosen on the --cv folds' out-of-fold predictions",
}


def threshold_rule(cv: int, threshold: Threshold) -> ThresholdRule:
    """The rule finalize decides at, from --cv and the spec's train.threshold."""
    if cv:
        return "out_of_fold"
    return "validation" if threshold == "tuned" else "fixed"


def best_configurations(spec: StudySpec, study) -> list:
    """The study's completed trials, best first, one per distinct set of parameters."""
    trials = sorted(
        completed_trials(study), key=lambda t: t.value, reverse=spec.direction == "maximize"
    )
    seen = set()
    distinct = []
    for trial in trials:
        key = json.dumps(trial.params, sort_keys=True)
        if key not in seen:
            seen.add(key)
            distinct.append(trial)
    return distinct


def nothing_to_finalize(name: str) -> UsageError:
    return UsageError(f"study {name!r} has no completed trial to finalize; run hpo tune first")


def require_a_completed_trial(study) -> None:
    """Said first, before where finalize would write or whether the search is finished: with
    no completed trial, fixing either only led to this."""
    if not completed_trials(study):
        raise nothing_to_finalize(study.study_name)


def plan(spec: StudySpec, study, top_k: int, seeds: int) -> list[Run]:
    """The best ``top_k`` distinct configurations, each with seeds 0..seeds-1 (seed 0
    reproduces the trial itself when the spec fixes no other seed); the run at the trial's
    own seed says whether the trial's kept checkpoint is that run (``reuse.judge``)."""
    chosen = best_configurations(spec, study)
    if not chosen:
        raise nothing_to_finalize(spec.name)
    base = int(spec.setting("seed"))
    uid = study_uid(study)
    runs = []
    for rank, trial in enumerate(chosen[:top_k], start=1):
        mine = [Run(rank, trial.number, dict(trial.params), base + s) for s in range(seeds)]
        # the trial's own seed where a run has it; else the first, which says why not
        own_seed = trial.user_attrs.get(SEED_ATTR)
        own = next((i for i, run in enumerate(mine) if run.seed == own_seed), 0)
        config = train_config(spec, mine[own].params, mine[own].seed, None)
        mine[own] = dataclasses.replace(mine[own], reuse=judge(trial, config, uid))
        runs += mine
    return runs


def plan_lines(
    spec: StudySpec,
    study,
    runs: list[Run],
    settings: Settings,
    workers: int,
    rule: ThresholdRule,
) -> list[str]:
    """The plan in a few lines, said before the first retraining: the configurations (and
    fewer than --top-k where the study has fewer), how many retrainings, at how many at a
    time, the model they make, its refit, the --cv folds and the decision thresholds."""
    values = {trial.number: trial.value for trial in completed_trials(study)}
    available = len(best_configurations(spec, study))
    trials = list(dict.fromkeys(run.trial for run in runs))
    seeds = settings.seeds
    which = (
        f"the study's {available} distinct completed (fewer than --top-k {settings.top_k})"
        if available < settings.top_k
        else f"the best {len(trials)} of the study's {available} distinct completed"
    )
    extra = settings.cv + (settings.refit == REFIT_WITH_VALIDATION)
    ensemble = settings.ensemble == "seeds" and seeds > 1
    reused = sum(bool(run.reuse and run.reuse.checkpoint) for run in runs)
    to_train = len(runs) - reused
    return [
        f"finalize {spec.name}: the plan",
        f"  configurations  {which}: "
        + ", ".join(f"trial {n} ({spec.metric} {values[n]:.4f})" for n in trials),
        f"  retrainings     {seeds} seed(s) each: {len(runs)}"
        + (f", {reused} of them a trial's checkpoint, so {to_train} to train" if reused else "")
        + (f", then {extra} more of the chosen one" if extra else "")
        + f"; {min(workers, max(to_train, 1))} at a time (--workers {workers})",
        *reuse_lines(runs),
        f"  chosen by       the best mean validation {spec.metric} over its seeds",
        "  model           "
        + (
            f"its {seeds} seeds averaged into one (--ensemble seeds)"
            if ensemble
            else "its best seed on validation (--ensemble none)"
            if seeds > 1
            else "its one seed"
        )
        + (
            ", retrained once more on train + validation (--refit train+val)"
            if settings.refit == REFIT_WITH_VALIDATION
            else ", as trained on train (--refit train)"
        ),
        "  cv              "
        + (
            f"{settings.cv} folds of train + validation, for the thresholds and the spread"
            if settings.cv
            else "none (--cv 0)"
        ),
        f"  thresholds      {RULE_PLAN[rule]}",
        "  test            scored once, by the chosen model",
    ]


def reuse_lines(runs: list[Run]) -> list[str]:
    """Per configuration, whether the run at its trial's seed is the trial's kept checkpoint
    or is retrained, and why."""
    judged = [run for run in runs if run.reuse is not None]
    words = [
        f"{run.name}: trial {run.reuse.trial}'s kept checkpoint, not retrained"
        if run.reuse.checkpoint
        else f"{run.name}: retrained, as {run.reuse.why}"
        for run in judged
    ]
    return [f"  {'reuse' if i == 0 else '':<16}{line}" for i, line in enumerate(words)]


def better_since(spec: StudySpec, study, summary: FinalSummary) -> str | None:
    """A line for a finalized study whose search has since found a configuration better
    than every one that finalize retrained, or None."""
    retrained = {c.trial for c in summary.configurations}
    best = next(iter(best_configurations(spec, study)), None)
    if best is None or best.number in retrained:
        return None
    values = {t.number: t.value for t in completed_trials(study) if t.number in retrained}
    if not values:
        return None
    maximize = spec.direction == "maximize"
    top = (max if maximize else min)(values, key=values.get)
    if (best.value > values[top]) if maximize else (best.value < values[top]):
        return (
            f"the study's best is now trial {best.number} ({spec.metric} {best.value:.4f}), "
            f"found after this final was made from trial {top} ({values[top]:.4f}) and the "
            "others it retrained"
        )
    return None
