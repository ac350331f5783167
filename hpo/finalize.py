"""hpo finalize: from a finished search to one model with an honest test score.

The study's top-k configurations are retrained with several seeds each, on the search's
own split. The configuration with the best mean validation score wins; its best seed's
model is scored ONCE on the test split, at thresholds chosen on validation, and saved
under ``<output_dir>/<study>-<uid>/final/`` with ``metrics.json`` and ``model_card.md``,
then recorded in the study (a user attribute and two artifacts, for the dashboard).

Every retraining writes ``runs/<trial>-seed<s>/result.json`` when it is done, so a killed
finalize resumes with the unfinished ones only; a finished one is never scored again.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from joblib import Parallel, cpu_count, delayed
from tqdm import tqdm

from hpo.data import files_fingerprint
from hpo.errors import UsageError
from hpo.model_card import model_card
from hpo.outputs import atomic_text
from hpo.process import redact
from hpo.spec import StudySpec, load_spec
from hpo.study import artifact_store, completed_trials, load_existing_study, study_uid, upload
from hpo.tracking import Tracker
from hpo.train.config import TrainConfig
from hpo.train.evaluate import objective_value
from hpo.train.holdout import score_on_test

FINAL_ATTR = "final"  # the study user attribute that holds finalize's summary
REFITS = ("train", "train+val")  # the chosen model as retrained, or once more on train + validation
LIBRARIES = ("hpo", "torch", "transformers", "optuna", "scikit-learn", "peft")


@dataclass(frozen=True)
class Run:
    """One retraining: a configuration (the trial it comes from) with one seed."""
    rank: int  # of the configuration in the study, 1 = best
    trial: int
    params: dict
    seed: int

    @property
    def name(self) -> str:
        return f"trial_{self.trial}-seed_{self.seed}"


def finalize(spec_path: str, overrides, storage: str | None, top_k: int = 3, seeds: int = 3, workers: int = 1,
             refit: str = "train", progress: bool = True, say: Callable[[str], None] = print) -> dict:
    if top_k < 1 or seeds < 1 or workers < 1:
        raise UsageError(f"--top-k, --seeds and --workers must be at least 1, got {top_k}, {seeds}, {workers}")
    if refit not in REFITS:
        raise UsageError(f"--refit must be one of {', '.join(REFITS)}, got {refit!r}")
    spec = load_spec(spec_path, overrides, storage)
    study = load_existing_study(spec.name, spec.storage)
    final_dir = spec.study_dir(study_uid(study) or "") / "final"
    if (final_dir / "metrics.json").exists():  # the test split is scored once: a finished finalize is only read
        say(f"{spec.name}: already finalized; the model and its test score are in {final_dir}")
        return json.loads((final_dir / "metrics.json").read_text())
    runs = plan(spec, study, top_k, seeds)
    records = _retrain_all(spec, runs, final_dir / "runs", workers, progress, say)
    summary = _choose(spec, runs, records)
    chosen = summary["chosen"]
    config = _config(spec, chosen["params"], chosen["seed"], None)
    chosen["threshold"] = config.threshold
    model_dir = final_dir / "runs" / chosen["run"] / "model"
    if refit == "train+val":
        config, model_dir = _refit(config, chosen, model_dir, final_dir / "refit", say)
    summary["refit"] = {"on": refit, "epochs": config.epochs if refit == "train+val" else None}
    tested = score_on_test(config, model_dir)
    summary |= {"test": {"metrics": _rounded(tested.metrics), "per_symptom": tested.per_symptom,
                         "thresholds": tested.thresholds},
                "split_sizes": tested.split_sizes, "data_fingerprint": files_fingerprint(spec.data_dir)[:16],
                "libraries": _versions(), "command": _command_line(),
                "finished": datetime.now(UTC).isoformat(timespec="seconds")}
    _publish(final_dir, model_dir, summary)
    _record(study, spec, final_dir, summary)
    Tracker(spec.tracking.mlflow, spec.name).log_final_model(
        chosen["params"], summary["test"]["metrics"],
        {"model": final_dir / "model", "model_card.md": final_dir / "model_card.md",
         "metrics.json": final_dir / "metrics.json"})
    say(f"{spec.name}: chose trial {chosen['trial']} (validation {spec.metric} {summary['configurations'][0]['mean']:.4f}"
        f" ± {summary['configurations'][0]['sd']:.4f} over {seeds} seeds); test {spec.metric} "
        f"{_test_value(spec, summary):.4f}; model in {final_dir / 'model'}")
    return summary


def plan(spec: StudySpec, study, top_k: int, seeds: int) -> list[Run]:
    """The best ``top_k`` distinct configurations, each with seeds 0..seeds-1 (seed 0
    reproduces the trial itself when the spec fixes no other seed)."""
    trials = sorted(completed_trials(study), key=lambda t: t.value, reverse=spec.direction == "maximize")
    chosen, seen = [], set()
    for trial in trials:
        key = json.dumps(trial.params, sort_keys=True)
        if key not in seen:
            seen.add(key)
            chosen.append(trial)
    if not chosen:
        raise UsageError(f"study {spec.name!r} has no completed trial to finalize; run hpo tune first")
    base = int(spec.train.get("seed", 0))
    return [Run(rank, trial.number, dict(trial.params), base + s)
            for rank, trial in enumerate(chosen[:top_k], start=1) for s in range(seeds)]


def _config(spec: StudySpec, params: dict, seed: int, checkpoint_dir: Path | None) -> TrainConfig:
    config = spec.train_config(params, checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None)
    return dataclasses.replace(config, seed=seed)


def _retrain_all(spec: StudySpec, runs: list[Run], runs_dir: Path, workers: int, progress: bool,
                 say: Callable[[str], None]) -> dict[str, dict]:
    """Results of every run: read back where a previous finalize finished them, trained otherwise."""
    records = {run.name: json.loads(path.read_text()) for run in runs
               if (path := runs_dir / run.name / "result.json").exists()}
    pending = [run for run in runs if run.name not in records]
    if records:
        say(f"resuming: {len(records)} of {len(runs)} retrainings already finished; training the other {len(pending)}")
    threads = max(1, cpu_count(only_physical_cores=False) // workers)
    jobs = (delayed(_retrain)(_config(spec, run.params, run.seed, runs_dir / run.name / "model"), run,
                              runs_dir / run.name, threads) for run in pending)
    with tqdm(total=len(runs), initial=len(records), unit="run", disable=not progress, dynamic_ncols=True) as bar:
        # joblib's process pool: the retrainings are independent, and a worker that dies fails loudly
        for record in Parallel(n_jobs=min(workers, max(len(pending), 1)), return_as="generator_unordered")(jobs):
            records[record["run"]] = record
            bar.update()
    return records


def _retrain(config: TrainConfig, run: Run, run_dir: Path, threads: int) -> dict:
    import torch

    from hpo.train.loop import train

    torch.set_num_threads(threads)
    result = train(config)
    record = {"run": run.name, "rank": run.rank, "trial": run.trial, "seed": run.seed, "params": run.params,
              "value": result.value, "best_epoch": result.best_epoch, "metrics": _rounded(result.metrics),
              "wall_seconds": round(result.wall_seconds, 1)}
    _write_json(run_dir / "result.json", record)  # last: its presence means the run and its model are complete
    return record


def _choose(spec: StudySpec, runs: list[Run], records: dict[str, dict]) -> dict:
    """Per configuration the mean ± sd of the validation value over seeds; the best mean
    wins, and of its seeds the best validation value gives the model."""
    maximize = spec.direction == "maximize"
    configurations = []
    for rank in sorted({run.rank for run in runs}):
        mine = [records[run.name] for run in runs if run.rank == rank]
        values = [r["value"] for r in mine]
        configurations.append({"rank": rank, "trial": mine[0]["trial"], "params": mine[0]["params"],
                               "mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                               "seeds": [{k: r[k] for k in ("seed", "value", "best_epoch", "run")} for r in mine]})
    configurations.sort(key=lambda c: c["mean"], reverse=maximize)
    best = configurations[0]
    pick = (max if maximize else min)(best["seeds"], key=lambda s: s["value"])
    return {"study": spec.name, "metric": spec.metric, "direction": spec.direction, "configurations": configurations,
            "chosen": {"trial": best["trial"], "params": best["params"], "seed": pick["seed"], "run": pick["run"],
                       "best_epoch": pick["best_epoch"], "validation": records[pick["run"]]["metrics"]}}


def _refit(config: TrainConfig, chosen: dict, chosen_model: Path, refit_dir: Path,
           say: Callable[[str], None]) -> tuple[TrainConfig, Path]:
    """The chosen configuration and seed retrained on train + validation for its best epoch
    count, deciding at the thresholds its train-only run chose on validation (the refit
    has seen validation, so it cannot choose them)."""
    epochs = chosen["best_epoch"]
    config = dataclasses.replace(config, train_on="train+validation", epochs=epochs, early_stopping_patience=None,
                                 checkpoint_dir=str(refit_dir / "model"))
    if not (refit_dir / "result.json").exists():
        say(f"refit: trial {chosen['trial']}'s configuration, seed {chosen['seed']}, on train + validation "
            f"for {epochs} epochs")
        from hpo.train.loop import train

        train(config)
        inference = json.loads((chosen_model / "classifier.json").read_text())["inference"]
        meta_path = refit_dir / "model" / "classifier.json"
        meta = json.loads(meta_path.read_text())
        meta["inference"] |= {k: inference[k] for k in ("thresholds", "validation_thresholds")}
        _write_json(meta_path, meta)
        _write_json(refit_dir / "result.json", {"epochs": epochs, "trial": chosen["trial"], "seed": chosen["seed"]})
    return config, refit_dir / "model"


def _publish(final_dir: Path, model_dir: Path, summary: dict) -> None:
    """The model, metrics.json and model_card.md; metrics.json goes last, as the mark of a
    finished finalize."""
    staged = final_dir / "model.partial"
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(model_dir, staged)
    shutil.rmtree(final_dir / "model", ignore_errors=True)
    staged.rename(final_dir / "model")
    with atomic_text(final_dir / "model_card.md") as stream:
        stream.write(model_card(summary))
    _write_json(final_dir / "metrics.json", summary)


def _record(study, spec: StudySpec, final_dir: Path, summary: dict) -> None:
    """The study carries the result, so optuna-dashboard shows it beside the search."""
    store = artifact_store(spec.output_dir)
    chosen = summary["chosen"]
    study.set_user_attr(FINAL_ATTR, {
        "trial": chosen["trial"], "seed": chosen["seed"], "model": str(final_dir / "model"),
        f"validation_{spec.metric}_mean": round(summary["configurations"][0]["mean"], 6),
        f"test_{spec.metric}": round(_test_value(spec, summary), 6),
        "model_card_artifact": upload(store, study, final_dir / "model_card.md"),
        "metrics_artifact": upload(store, study, final_dir / "metrics.json"),
    })


def _test_value(spec: StudySpec, summary: dict) -> float:
    """The test score at the model's decision thresholds, as a trial's value is judged."""
    return objective_value(summary["test"]["metrics"], spec.metric, summary["chosen"]["threshold"])


def _command_line() -> str:
    """How finalize was run, for the card, with any storage password masked."""
    return " ".join(["hpo", *(redact(arg) if "://" in arg else arg for arg in sys.argv[1:])])


def _versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _rounded(metrics: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in metrics.items()}


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_text(path) as stream:  # a kill mid-write leaves no half-written result behind
        stream.write(json.dumps(data, indent=2, default=str) + "\n")
