"""hpo finalize: from a finished search to one model with an honest test score.

The study's top-k configurations are retrained with several seeds each, on the search's
own split. The configuration with the best mean validation score wins; its best seed's
model is scored ONCE on the test split, at thresholds chosen on validation, and saved
under ``<output_dir>/<study>-<uid>/final/`` with ``metrics.json`` and ``model_card.md``,
then recorded in the study (a user attribute and two artifacts, for the dashboard).

Every retraining writes ``runs/<trial>-seed<s>/result.json`` when it is done, so a killed
finalize resumes with the unfinished ones only; a finished one is never scored again, and
its retraining processes die with it (``hpo.finalize.retrain``). One finalize per study at a time:
a lock that the database or the kernel releases when its holder dies. Refused before
anything is retrained: a search still running or short of its n_trials (unless
``--partial``), a spec or data other than the study's, a split without test posts.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import statistics
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from hpo.data import files_fingerprint, load_redsm5, split_posts, symptom_profiles
from hpo.errors import UsageError
from hpo.finalize.holdout import score_on_test, score_on_validation
from hpo.finalize.model_card import command_line, library_versions, model_card
from hpo.finalize.retrain import Run, retrain_all, rounded, train_config, write_json
from hpo.models.classifier_file import read_inference
from hpo.models.ensemble_file import write_ensemble
from hpo.models.loading import hide_progress_bars
from hpo.outputs import atomic_text
from hpo.spec import StudySpec, load_spec
from hpo.study import (
    artifact_store,
    check_spec,
    completed_trials,
    load_existing_study,
    study_lock,
    study_uid,
    trial_census,
    upload,
)
from hpo.tracking import Tracker
from hpo.train.config import TrainConfig
from hpo.train.evaluate import objective_value

FINAL_ATTR = "final"  # the study user attribute that holds finalize's summary
REFITS = ("train", "train+val")  # the chosen model as retrained, or once more on train + validation
# seeds: the chosen configuration's seeds averaged into one model; none: its best seed alone
ENSEMBLES = ("seeds", "none")
DEFAULTS = {"top_k": 3, "seeds": 3, "refit": "train", "ensemble": "seeds"}  # their flags

__all__ = ["FINAL_ATTR", "Run", "finalize", "plan"]


def finalize(
    spec_path: str,
    overrides,
    storage: str | None,
    top_k: int | None = None,
    seeds: int | None = None,
    workers: int = 1,
    refit: str | None = None,
    ensemble: str | None = None,
    partial: bool = False,
    progress: bool = True,
    say: Callable[[str], None] = print,
) -> dict:
    """``top_k``, ``seeds``, ``refit`` and ``ensemble`` left None take their DEFAULTS; given,
    they are named as ignored when the study was finalized already with others."""
    asked = {"top_k": top_k, "seeds": seeds, "refit": refit, "ensemble": ensemble}
    settings = {key: DEFAULTS[key] if value is None else value for key, value in asked.items()}
    if refit == "train+val" and ensemble is None:
        settings["ensemble"] = "none"  # the refit retrains one model
    top_k, seeds, refit = settings["top_k"], settings["seeds"], settings["refit"]
    ensemble = settings["ensemble"]
    if top_k < 1 or seeds < 1 or workers < 1:
        raise UsageError(
            f"--top-k, --seeds and --workers must be at least 1, got {top_k}, {seeds}, {workers}"
        )
    if refit not in REFITS:
        raise UsageError(f"--refit must be one of {', '.join(REFITS)}, got {refit!r}")
    if ensemble not in ENSEMBLES:
        raise UsageError(f"--ensemble must be one of {', '.join(ENSEMBLES)}, got {ensemble!r}")
    if ensemble != "none" and refit == "train+val":
        raise UsageError(
            "--refit train+val retrains one model, so it cannot be an ensemble; "
            "pass --ensemble none with it, or leave --refit out"
        )
    if not progress:
        hide_progress_bars()  # transformers' too, where the retrainings run in this process
    spec = load_spec(spec_path, overrides, storage)
    study = load_existing_study(spec.name, spec.storage)
    study_folder = spec.study_dir(study_uid(study) or "")
    final_dir = study_folder / "final"
    with study_lock(
        study, "finalize", study_folder
    ) as lock:  # a second finalize of the study exits at once
        if (
            final_dir / "metrics.json"
        ).exists():  # the test split is scored once: a finished finalize is only read
            return _finalized(spec, final_dir, asked, say)
        check_spec(
            study, spec, "finalize with the spec, --set flags and data the study was tuned with"
        )
        search = _search_state(study, spec, partial)
        runs = plan(spec, study, top_k, seeds)
        # before hours of retraining
        _require_test_split(train_config(spec, runs[0].params, runs[0].seed, None))
        records = retrain_all(
            spec, spec_path, overrides, runs, final_dir / "runs", workers, progress, say
        )
        summary = _choose(spec, runs, records)
        chosen = summary["chosen"]
        config = train_config(spec, chosen["params"], chosen["seed"], None)
        chosen["threshold"] = config.threshold
        model_dir = final_dir / "runs" / chosen["run"] / "model"
        if ensemble == "seeds" and seeds > 1:
            model_dir = _ensemble(spec, config, summary, final_dir, say)
        if refit == "train+val":
            config, model_dir = _refit(config, chosen, model_dir, final_dir / "refit", say)
        summary["refit"] = {"on": refit, "epochs": config.epochs if refit == "train+val" else None}
        lock.confirm()  # the test split is scored by one finalize only
        tested = score_on_test(config, model_dir)
        summary |= {
            "test": {
                "metrics": rounded(tested.metrics),
                "per_symptom": tested.per_symptom,
                "thresholds": tested.thresholds,
            },
            "split_sizes": tested.split_sizes,
            "data_fingerprint": files_fingerprint(spec.data_dir)[:16],
            "settings": settings,
            "search": search,
            "libraries": library_versions(),
            "command": command_line(),
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        _publish(final_dir, model_dir, summary)
        _record(study, spec, final_dir, summary)
    Tracker(spec.tracking.mlflow, spec.name).log_final_model(
        chosen["params"],
        summary["test"]["metrics"],
        {
            "model": final_dir / "model",
            "model_card.md": final_dir / "model_card.md",
            "metrics.json": final_dir / "metrics.json",
        },
    )
    say(
        f"{spec.name}: chose trial {chosen['trial']} (validation {spec.metric} "
        f"{summary['configurations'][0]['mean']:.4f}"
        f" ± {summary['configurations'][0]['sd']:.4f} over {seeds} seeds); test {spec.metric} "
        f"{_test_value(spec, summary):.4f}; model in {final_dir / 'model'}"
    )
    return summary


def plan(spec: StudySpec, study, top_k: int, seeds: int) -> list[Run]:
    """The best ``top_k`` distinct configurations, each with seeds 0..seeds-1 (seed 0
    reproduces the trial itself when the spec fixes no other seed)."""
    trials = sorted(
        completed_trials(study), key=lambda t: t.value, reverse=spec.direction == "maximize"
    )
    chosen, seen = [], set()
    for trial in trials:
        key = json.dumps(trial.params, sort_keys=True)
        if key not in seen:
            seen.add(key)
            chosen.append(trial)
    if not chosen:
        raise UsageError(
            f"study {spec.name!r} has no completed trial to finalize; run hpo tune first"
        )
    base = int(spec.train.get("seed", 0))
    return [
        Run(rank, trial.number, dict(trial.params), base + s)
        for rank, trial in enumerate(chosen[:top_k], start=1)
        for s in range(seeds)
    ]


def _search_state(study, spec: StudySpec, partial: bool) -> dict:
    """How far the search got; a search still running or short of its n_trials is refused
    unless ``partial``: its best trials may not be the study's."""
    census = trial_census(study)
    n_trials = study.user_attrs.get("n_trials", spec.n_trials)
    unfinished = census["running"] > 0 or census["finished"] < n_trials
    if unfinished and not partial:
        raise UsageError(
            f"study {spec.name!r} is not finished: "
            f"{census['finished']} of {n_trials} trials finished, "
            f"{census['running']} running, {census['waiting']} waiting; "
            "let hpo tune finish it, or pass "
            "--partial to finalize from the trials finished so far"
        )
    return {
        "n_trials": n_trials,
        "finished": census["finished"],
        "running": census["running"],
        "partial": unfinished,
    }


def _require_test_split(config: TrainConfig) -> None:
    corpus = load_redsm5(config.data_dir)
    split = split_posts(symptom_profiles(corpus), config.split_fractions, seed=config.split_seed)
    split.require(
        ("train", "validation", "test"),
        config.split_fractions,
        why=" and hpo finalize scores its model there",
    )


def _finalized(spec: StudySpec, final_dir: Path, asked: dict, say: Callable[[str], None]) -> dict:
    """A finished finalize, read back: its model checked against what metrics.json lists
    (restored from the run it was copied from where it is missing), and the settings asked
    for now named as ignored where they differ from those it ran with."""
    summary = json.loads((final_dir / "metrics.json").read_text())
    model = final_dir / "model"
    if _intact(model, summary):
        say(f"{spec.name}: already finalized; the model and its test score are in {final_dir}")
    else:
        if summary.get("refit", {}).get("on") == "train+val":
            source = final_dir / "refit" / "model"
        elif summary.get("ensemble"):
            source = final_dir / "ensemble"
        else:
            source = final_dir / "runs" / summary["chosen"]["run"] / "model"
        if not _intact(source, summary):
            raise UsageError(
                f"{spec.name}: finalized, but {model} is missing or incomplete, "
                f"and so is {source} it "
                "was copied from; the test split was scored already (metrics.json): "
                f"move {final_dir} "
                "aside to finalize anew"
            )
        _place_model(final_dir, source)
        say(
            f"{spec.name}: already finalized; {model} was missing or incomplete "
            f"and is restored from {source}, "
            f"the model metrics.json scored"
        )
    done = {
        "top_k": len(summary["configurations"]),
        "seeds": len(summary["configurations"][0]["seeds"]),
        "refit": summary.get("refit", {}).get("on", "train"),
        "ensemble": "seeds" if summary.get("ensemble") else "none",
        **summary.get("settings", {}),
    }
    ignored = [
        f"--{key.replace('_', '-')} {value}"
        for key, value in asked.items()
        if value is not None and value != done[key]
    ]
    if ignored:
        ran = " ".join(f"--{key.replace('_', '-')} {value}" for key, value in done.items())
        say(
            f"ignored: {', '.join(ignored)}; the study was finalized with {ran} "
            "and its test split is scored once "
            f"(move {final_dir} aside to finalize anew)"
        )
    return summary


def _intact(model: Path, summary: dict) -> bool:
    """Every file metrics.json lists for the model is there, at its size (a summary from
    before the list: its classifier.json is)."""
    files = summary.get("model_files")
    if not files:
        return (model / "classifier.json").is_file()
    return all(
        (path := model / name).is_file() and path.stat().st_size == size
        for name, size in files.items()
    )


def _choose(spec: StudySpec, runs: list[Run], records: dict[str, dict]) -> dict:
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


def _ensemble(spec: StudySpec, config: TrainConfig, summary: dict, final_dir: Path, say) -> Path:
    """The chosen configuration's seeds averaged into one model (``final/ensemble``), scored on
    validation beside each seed alone; it becomes the chosen model. No seed is picked, so no
    selection on validation inflates the score that test then checks."""
    best = summary["configurations"][0]
    members = {seed["run"]: final_dir / "runs" / seed["run"] / "model" for seed in best["seeds"]}
    evaluation = score_on_validation(config, list(members.values()))
    labels = read_inference(next(iter(members.values()))).labels
    thresholds = (
        evaluation.thresholds if config.threshold == "tuned" else dict.fromkeys(labels, 0.5)
    )
    folder = final_dir / "ensemble"
    shutil.rmtree(folder, ignore_errors=True)  # rebuilt from the kept runs on a resumed finalize
    write_ensemble(folder, members, thresholds, evaluation.thresholds)
    value = objective_value(evaluation.metrics, spec.metric, config.threshold)
    summary["ensemble"] = {"members": list(members), "value": value}
    summary["chosen"] |= {"seed": None, "validation": rounded(evaluation.metrics)}
    alone = ", ".join(f"{seed['value']:.4f}" for seed in best["seeds"])
    say(f"ensemble of {len(members)} seeds: validation {spec.metric} {value:.4f} (alone: {alone})")
    return folder


def _refit(
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


def _publish(final_dir: Path, model_dir: Path, summary: dict) -> None:
    """The model, metrics.json (with the model's files and sizes, so a rerun can check the
    model) and model_card.md; metrics.json goes last, as the mark of a finished finalize."""
    _place_model(final_dir, model_dir)
    summary["model_files"] = {
        str(path.relative_to(final_dir / "model")): path.stat().st_size
        for path in sorted((final_dir / "model").rglob("*"))
        if path.is_file()
    }
    with atomic_text(final_dir / "model_card.md") as stream:
        stream.write(model_card(summary))
    write_json(final_dir / "metrics.json", summary)


def _place_model(final_dir: Path, model_dir: Path) -> None:
    """``model_dir`` copied to ``final_dir/model``, replacing it whole (staged, then renamed)."""
    staged = final_dir / "model.partial"
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(model_dir, staged)
    shutil.rmtree(final_dir / "model", ignore_errors=True)
    staged.rename(final_dir / "model")


def _record(study, spec: StudySpec, final_dir: Path, summary: dict) -> None:
    """The study carries the result, so optuna-dashboard shows it beside the search."""
    store = artifact_store(spec.output_dir)
    chosen = summary["chosen"]
    study.set_user_attr(
        FINAL_ATTR,
        {
            "trial": chosen["trial"],
            "seed": chosen["seed"],  # None: the ensemble of the configuration's seeds
            "ensemble_of": summary.get("ensemble", {}).get("members"),
            "model": str(final_dir / "model"),
            f"validation_{spec.metric}_mean": round(summary["configurations"][0]["mean"], 6),
            f"test_{spec.metric}": round(_test_value(spec, summary), 6),
            "model_card_artifact": upload(store, study, final_dir / "model_card.md"),
            "metrics_artifact": upload(store, study, final_dir / "metrics.json"),
        },
    )


def _test_value(spec: StudySpec, summary: dict) -> float:
    """The test score at the model's decision thresholds, as a trial's value is judged."""
    return objective_value(summary["test"]["metrics"], spec.metric, summary["chosen"]["threshold"])
