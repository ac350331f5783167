"""From the retrained runs to the model the test split scores: the configuration with the
best mean validation value over seeds, its seeds averaged into an ensemble (or its best seed),
optionally refit on train + validation; and --cv's K-fold report on that configuration."""

from __future__ import annotations

import dataclasses
import json
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path

from hpo.finalize.holdout import score_on_validation
from hpo.finalize.retrain import Run, rounded, write_json
from hpo.models.classifier_file import read_inference
from hpo.models.ensemble_file import write_ensemble
from hpo.spec import StudySpec
from hpo.train.config import TrainConfig
from hpo.train.evaluate import objective_value


def by_mean_validation(spec: StudySpec, runs: list[Run], records: dict[str, dict]) -> dict:
    """Per configuration the mean ± sd of the validation value over seeds; the best mean
    wins, and of its seeds the best validation value gives the model."""
    maximize = spec.direction == "maximize"
    configurations = []
    for rank in sorted({run.rank for run in runs}):
        mine = [records[run.name] for run in runs if run.rank == rank]
        values = [r["value"] for r in mine]
        configurations.append(
            {
                "rank": rank,
                "trial": mine[0]["trial"],
                "params": mine[0]["params"],
                "mean": statistics.fmean(values),
                "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                "seeds": [{k: r[k] for k in ("seed", "value", "best_epoch", "run")} for r in mine],
            }
        )
    configurations.sort(key=lambda c: c["mean"], reverse=maximize)
    best = configurations[0]
    pick = (max if maximize else min)(best["seeds"], key=lambda s: s["value"])
    return {
        "study": spec.name,
        "metric": spec.metric,
        "direction": spec.direction,
        "configurations": configurations,
        "chosen": {
            "trial": best["trial"],
            "params": best["params"],
            "seed": pick["seed"],
            "run": pick["run"],
            "best_epoch": pick["best_epoch"],
            "validation": records[pick["run"]]["metrics"],
        },
    }


def cross_validate(summary: dict, k: int, retrain, say: Callable[[str], None]) -> dict:
    """The chosen configuration (its first seed) retrained on each of K folds of the train +
    validation posts, validated on the fold held out: how much its score moves with the
    data it sees, beside the seeds' spread. A report: it chooses nothing, touches no test."""
    best = summary["configurations"][0]
    seed = best["seeds"][0]["seed"]
    runs = [Run(1, best["trial"], best["params"], seed, folds=k, fold=i) for i in range(k)]
    say(f"cross-validation: trial {best['trial']}'s configuration, {k} folds of train + validation")
    records = retrain(runs)
    values = [records[run.name]["value"] for run in runs]
    return {
        "k": k,
        "seed": seed,
        "values": values,
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values),
        "runs": [run.name for run in runs],
    }


def ensemble_of_seeds(
    spec: StudySpec, config: TrainConfig, summary: dict, final_dir: Path, say
) -> Path:
    """The chosen configuration's seeds averaged into one model (``final/ensemble``), scored on
    validation beside each seed alone; it becomes the chosen model. No seed is picked, so no
    selection on validation inflates the score that test then checks."""
    best = summary["configurations"][0]
    members = {seed["run"]: final_dir / "runs" / seed["run"] / "model" for seed in best["seeds"]}
    evaluation = score_on_validation(config, list(members.values()))
    tuned = evaluation.thresholds
    thresholds = tuned if config.threshold == "tuned" else dict.fromkeys(tuned, 0.5)
    folder = final_dir / "ensemble"
    shutil.rmtree(folder, ignore_errors=True)  # rebuilt from the kept runs on a resumed finalize
    write_ensemble(folder, members, thresholds, tuned)
    value = objective_value(evaluation.metrics, spec.metric, config.threshold)
    summary["ensemble"] = {"members": list(members), "value": value}
    summary["chosen"] |= {"seed": None, "validation": rounded(evaluation.metrics)}
    alone = ", ".join(f"{seed['value']:.4f}" for seed in best["seeds"])
    say(f"ensemble of {len(members)} seeds: validation {spec.metric} {value:.4f} (alone: {alone})")
    return folder


def refit(
    config: TrainConfig,
    chosen: dict,
    chosen_model: Path,
    refit_dir: Path,
    say: Callable[[str], None],
) -> tuple[TrainConfig, Path]:
    """The chosen configuration and seed retrained on train + validation for its best epoch
    count, deciding at the thresholds its train-only run chose on validation (the refit
    has seen validation, so it cannot choose them)."""
    epochs = chosen["best_epoch"]
    config = dataclasses.replace(
        config,
        train_on="train+validation",
        epochs=epochs,
        early_stopping_patience=None,
        checkpoint_dir=str(refit_dir / "model"),
    )
    if not (refit_dir / "result.json").exists():
        say(
            f"refit: trial {chosen['trial']}'s configuration, seed {chosen['seed']}, "
            "on train + validation "
            f"for {epochs} epochs"
        )
        from hpo.train.loop import train

        train(config)
        chosen_inference = read_inference(chosen_model)
        meta_path = refit_dir / "model" / "classifier.json"
        meta = json.loads(meta_path.read_text())
        meta["inference"] = dataclasses.replace(
            read_inference(meta_path.parent),
            thresholds=chosen_inference.thresholds,
            validation_thresholds=chosen_inference.validation_thresholds,
        ).to_json()
        write_json(meta_path, meta)
        write_json(
            refit_dir / "result.json",
            {"epochs": epochs, "trial": chosen["trial"], "seed": chosen["seed"]},
        )
    return config, refit_dir / "model"
