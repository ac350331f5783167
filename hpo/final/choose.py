"""From the retrained runs to the model the test split scores: the configuration with the
best mean validation value over seeds, its seeds averaged into an ensemble (or its best seed),
deciding at thresholds chosen by a rule fixed before any training, optionally refit on train +
validation; and --cv's K folds of that configuration, which report how its score moves and
give every train + validation post one out-of-fold probability to choose thresholds on."""

from __future__ import annotations

import dataclasses
import json
import shutil
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from hpo.data import SYMPTOMS
from hpo.errors import UsageError
from hpo.final.holdout import compare_on_validation, heldout_cells
from hpo.final.retrain import Run, rounded, run_log, train_config
from hpo.final.summary import (
    Chosen,
    Configuration,
    CrossValidation,
    Decision,
    OutOfFold,
    RunResult,
    SeedEnsemble,
)
from hpo.outputs import write_json
from hpo.spec import StudySpec
from hpo.train.config import TrainConfig
from hpo.train.evaluate import objective_value
from hpo.train.metrics import PRIOR_POSITIVES, shrunk_threshold
from hpo.vocabulary import REFIT_TRAIN_ON, REFIT_WITH_VALIDATION, RULE_NAMES, ThresholdRule

HELDOUT_FILE = "heldout.json"  # in a --cv fold's run folder: its held-out posts' probabilities


def by_mean_validation(
    spec: StudySpec, runs: list[Run], records: dict[str, RunResult]
) -> tuple[list[Configuration], Chosen]:
    """Per configuration the mean ± sd of the validation value over seeds, best mean first;
    the best mean wins, and of its seeds the best validation value gives the model."""
    maximize = spec.direction == "maximize"
    configurations = []
    for rank in sorted({run.rank for run in runs}):
        mine = [records[run.name] for run in runs if run.rank == rank]
        values = [r.value for r in mine]
        configurations.append(
            Configuration(
                rank=rank,
                trial=mine[0].trial,
                params=mine[0].params,
                mean=statistics.fmean(values),
                sd=statistics.stdev(values) if len(values) > 1 else 0.0,
                # reused_from_trial: the seed is that trial's kept checkpoint, not retrained
                seeds=[r.seed_part() for r in mine],
            )
        )
    configurations.sort(key=lambda c: c.mean, reverse=maximize)
    best = configurations[0]
    pick = (max if maximize else min)(best.seeds, key=lambda s: s.value)
    chosen = Chosen(
        trial=best.trial,
        params=best.params,
        seed=pick.seed,
        run=pick.run,
        best_epoch=pick.best_epoch,
        validation=records[pick.run].metrics,
    )
    return configurations, chosen


def cross_validate(
    spec: StudySpec,
    best: Configuration,
    k: int,
    retrain,
    runs_dir: Path,
    say: Callable[[str], None],
) -> CrossValidation:
    """The ``best`` configuration (its first seed) retrained on each of K folds of the train +
    validation posts, validated on the fold held out: how much its score moves with the
    data it sees, beside the seeds' spread. Each fold's model then scores its held-out posts
    (kept in ``heldout.json``; the model is deleted), so every train + validation post has one
    out-of-fold probability, and per-symptom thresholds are chosen on them. Touches no test."""
    seed = best.seeds[0].seed
    runs = [Run(1, best.trial, best.params, seed, folds=k, fold=i) for i in range(k)]
    say(f"cross-validation: trial {best.trial}'s configuration, {k} folds of train + validation")
    records = retrain(runs)
    values = [records[run.name].value for run in runs]
    heldout = [_heldout(spec, run, runs_dir) for run in runs]
    return CrossValidation(
        k=k,
        seed=seed,
        values=values,
        mean=statistics.fmean(values),
        sd=statistics.stdev(values),
        runs=[run.name for run in runs],
        out_of_fold=out_of_fold_thresholds(heldout),
    )


def out_of_fold_thresholds(heldout: list[dict]) -> OutOfFold:
    """Per symptom, the threshold chosen on every fold's held-out probabilities together
    (``shrunk_threshold``: the F1-best cut, pulled toward 0.5 by few positives)."""
    posts = [post for fold in heldout for post in fold["posts"]]
    if len(set(posts)) != len(posts):
        raise ValueError("a post was held out by two folds: the folds must partition the posts")
    chosen = {
        symptom: shrunk_threshold(
            np.concatenate([fold["cells"][symptom]["truth"] for fold in heldout]),
            np.concatenate([fold["cells"][symptom]["scores"] for fold in heldout]),
        )
        for symptom in SYMPTOMS
    }
    return OutOfFold(
        posts=len(posts),
        prior_positives=PRIOR_POSITIVES,
        thresholds={symptom: round(row["threshold"], 6) for symptom, row in chosen.items()},
        per_symptom={
            symptom: {**row, "threshold": round(row["threshold"], 6)}
            for symptom, row in chosen.items()
        },
    )


def _heldout(spec: StudySpec, run: Run, runs_dir: Path) -> dict:
    """A fold run's held-out probabilities: read back, or scored from its model once."""
    folder = runs_dir / run.name
    if (folder / HELDOUT_FILE).exists():
        return json.loads((folder / HELDOUT_FILE).read_text())
    if not (folder / "model" / "classifier.json").exists():
        raise UsageError(
            f"{folder} holds neither {HELDOUT_FILE} nor the fold's model (a finalize from "
            f"before out-of-fold thresholds); delete {folder} so that it is retrained"
        )
    found = heldout_cells(
        train_config(spec, run.params, run.seed, None, run.cv_fold), folder / "model"
    )
    write_json(folder / HELDOUT_FILE, found)
    shutil.rmtree(folder / "model")  # a measurement: its probabilities are what is kept
    return found


@dataclasses.dataclass(frozen=True)
class Decided:
    """What ``decide`` found: the thresholds the model decides at and those tuned on
    validation, the record of the choice, the chosen model (its validation figures at the
    decision thresholds; an ensemble's seed None) and its seeds' ensemble, if any."""

    thresholds: dict[str, float]
    tuned: dict[str, float]
    decision: Decision
    chosen: Chosen
    ensemble: SeedEnsemble | None


def decide(
    spec: StudySpec,
    config: TrainConfig,
    configurations: list[Configuration],
    chosen: Chosen,
    cv: CrossValidation | None,
    members: dict[str, Path],
    rule: ThresholdRule,
    say: Callable[[str], None],
) -> Decided:
    """The thresholds the model test scores decides at, by ``rule``, and those tuned on
    validation (recorded beside them): ``members`` (run name -> model folder; several: the
    average of their probabilities) scored on validation at the fixed 0.5, at thresholds tuned
    there and (--cv) at the out-of-fold ones, for the card; the comparison informs the reader
    and chooses nothing."""
    fixed = dict.fromkeys(SYMPTOMS, 0.5)
    oof = cv.out_of_fold.thresholds if cv else None
    candidates = {"fixed": fixed, "validation": None} | ({"out_of_fold": oof} if oof else {})
    tuned, compared = compare_on_validation(config, list(members.values()), candidates)
    sets = {"fixed": fixed, "validation": tuned, "out_of_fold": oof}
    thresholds = sets[rule]
    decision = Decision(
        rule=rule,
        chosen=thresholds,
        candidates={name: sets[name] for name in candidates},
        validation={name: rounded(metrics) for name, metrics in compared.items()},
    )
    chosen = chosen.model_copy(update={"validation": rounded(compared[rule])})
    ensemble = None
    if len(members) > 1:
        # as each seed's value was judged: at 0.5, or at thresholds tuned on validation
        value = objective_value(
            compared["validation" if config.threshold == "tuned" else "fixed"], spec.metric, "fixed"
        )
        ensemble = SeedEnsemble(members=list(members), value=value)
        chosen = chosen.model_copy(update={"seed": None})
        say(ensemble_line(spec, value, configurations[0].seeds))
    say(f"decision thresholds: {RULE_NAMES[rule]}")
    return Decided(thresholds, tuned, decision, chosen, ensemble)


def refit(
    config: TrainConfig,
    chosen: Chosen,
    refit_dir: Path,
    say: Callable[[str], None],
) -> tuple[TrainConfig, Path]:
    """The chosen configuration and seed retrained on train + validation for its best epoch
    count; it decides at the thresholds decided for its train-only model (the refit has seen
    validation, so it cannot choose them), which ``final_folder.place`` writes into it."""
    epochs = chosen.best_epoch
    config = dataclasses.replace(
        config,
        train_on=REFIT_TRAIN_ON[REFIT_WITH_VALIDATION],
        epochs=epochs,
        early_stopping_patience=None,
        checkpoint_dir=str(refit_dir / "model"),
    )
    if not (refit_dir / "result.json").exists():
        say(
            f"refit: trial {chosen.trial}'s configuration, seed {chosen.seed}, "
            "on train + validation "
            f"for {epochs} epochs"
        )
        from hpo.train.loop import train

        with run_log(refit_dir, "refit"):
            train(config)
        write_json(
            refit_dir / "result.json",
            {"epochs": epochs, "trial": chosen.trial, "seed": chosen.seed},
        )
    return config, refit_dir / "model"


def ensemble_line(spec: StudySpec, value: float, seeds: Sequence) -> str:
    """What finalize says of a seed ensemble: its validation value beside each seed's, and,
    where it is worse than its best seed, that it is kept all the same and why (issue #55)."""
    alone = ", ".join(f"{s.value:.4f}" for s in seeds)
    sign = 1 if spec.direction == "maximize" else -1
    best = max(seeds, key=lambda s: sign * s.value)
    worse = (
        f"; worse than its best seed ({best.value:.4f}, seed {best.seed}) on validation, kept "
        "as the model all the same: a seed picked on these posts would flatter its test score"
        if sign * value < sign * best.value
        else ""
    )
    said = f"ensemble of {len(seeds)} seeds: validation {spec.metric} {value:.4f}"
    return f"{said} (alone: {alone}){worse}"
