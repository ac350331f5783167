"""What each CLI subcommand does. ``cli`` parses arguments and calls one of these."""

from __future__ import annotations

import csv
import json
import logging
import os
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from hpo.errors import UsageError
from hpo.spec import DEFAULT_STORAGE, STORAGE_ENV, StudySpec, load_spec

log = logging.getLogger(__name__)


def preflight(spec: StudySpec) -> list[str]:
    """Everything that can be checked before a study exists: the data loads and yields
    examples, every encoder can be found. Raises UsageError; returns notes for the user."""
    from hpo.data import build_examples, load_descriptions, load_redsm5

    descriptions = load_descriptions(spec.train.get("descriptions_path"))
    examples = build_examples(load_redsm5(spec.data_dir), spec.task, descriptions)
    notes = [f"{len(examples)} {spec.task} examples from {spec.data_dir}"]
    encoders = spec.search_space["encoder"].choices if "encoder" in spec.search_space else [spec.train["encoder"]]
    for name in encoders:
        path = spec.model_paths.get(name, name)
        notes.append(f"encoder {name}: {_check_encoder(str(name), str(path))}")
    check_gpus(spec)
    return notes


def gpus_per_trial(spec: StudySpec) -> int:
    """The most GPUs any trial of the spec can ask for."""
    searched = spec.search_space.get("gpus_per_trial")
    if searched is None:
        return int(spec.train.get("gpus_per_trial", 1))
    return int(max(searched.choices) if hasattr(searched, "choices") else searched.high)


def check_gpus(spec: StudySpec) -> None:
    from hpo.launcher import visible_gpus

    wanted = gpus_per_trial(spec)
    if wanted > 1 and len(available := visible_gpus()) < wanted:
        raise UsageError(f"gpus_per_trial={wanted} needs {wanted} GPUs per worker, but this machine has "
                         f"{len(available)}; set train.gpus_per_trial=1 or run on a machine with more GPUs")


def _check_encoder(name: str, path: str) -> str:
    local = Path(path)
    if local.exists():
        if not (local / "config.json").is_file():
            raise UsageError(f"encoder {name!r}: {path} has no config.json; point model_paths.{name} at a saved model")
        return f"local {path}"
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        cached = try_to_load_from_cache(path, "config.json")
    except HFValidationError:  # e.g. an absolute path that does not exist: not a hub id either
        raise UsageError(f"encoder {name!r}: {path} does not exist and is not a hub model id; "
                         f"use --set model_paths.{name}=/path/to/model") from None
    if isinstance(cached, str):
        return f"hub {path} (cached)"
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise UsageError(f"encoder {name!r}: {path} is neither a local directory nor in the hub cache, and "
                         f"HF_HUB_OFFLINE=1; use --set model_paths.{name}=/path/to/model")
    return f"hub {path} (downloaded on first use)"


def validate(spec_path: str, overrides: Sequence[str], storage: str | None) -> None:
    spec = load_spec(spec_path, overrides, storage)
    from hpo.study import make_pruner, make_sampler, mask_url

    make_sampler(spec), make_pruner(spec)
    for note in preflight(spec):
        print(f"  {note}")
    print(f"{spec_path}: valid — study {spec.name!r}, {spec.n_trials} trials, "
          f"{len(spec.search_space)} searched parameters, storage {mask_url(spec.storage)}")


def tune(spec_path: str, overrides: Sequence[str], storage: str | None, workers: int,
         restart_dead: bool, progress: bool = True) -> int:
    from hpo.launcher import (
        StudyProgress,
        Supervisor,
        available_cpus,
        visible_gpus,
        worker_launches,
    )
    from hpo.study import mask_url, open_study

    if workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")
    spec = load_spec(spec_path, overrides, storage)
    preflight(spec)
    study = open_study(spec)  # created once here, so workers never race to create it
    print(f"study {spec.name!r} on {mask_url(spec.storage)}: {spec.n_trials} trials, {workers} workers")
    launches = worker_launches(spec_path, workers, storage=spec.storage, overrides=overrides,
                               gpus_per_trial=gpus_per_trial(spec),
                               cpu_count=available_cpus(), gpu_ids=visible_gpus())
    bar = StudyProgress(study, spec.n_trials, enabled=progress)
    try:
        code = Supervisor(launches, bar, restart_dead=restart_dead).run()
    finally:
        bar.close()
    if code == 0:
        _print_best(study)
    return code


def worker(spec_path: str, overrides: Sequence[str], storage: str | None, name: str | None,
           threads: int | None) -> int:
    import socket

    from hpo.worker import TooManyFailures, run_worker

    spec = load_spec(spec_path, overrides, storage)
    check_gpus(spec)
    name = name or f"{socket.gethostname()}/{os.getpid()}"
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [{name}] %(message)s", stream=sys.stdout)
    for noisy in ("optuna", "transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if threads:
        import torch

        torch.set_num_threads(threads)
    try:
        ran = run_worker(spec, worker=name, num_threads=threads)
    except TooManyFailures as exc:
        log.error("%s", exc)
        return 1
    except KeyboardInterrupt:
        return 130
    log.info("worker %s done after %d trials", name, ran)
    return 0


def _study_and_spec(study: str, storage: str | None):
    """STUDY is a spec file (name and storage from it) or a study name."""
    from hpo.study import load_existing_study

    if study.endswith((".yaml", ".yml")) and Path(study).exists():
        spec = load_spec(study, (), storage)
        return load_existing_study(spec.name, spec.storage), spec
    url = storage or os.environ.get(STORAGE_ENV) or DEFAULT_STORAGE
    return load_existing_study(study, url), None


def status(study_name: str, storage: str | None) -> None:
    from hpo.study import state_counts

    study, _ = _study_and_spec(study_name, storage)
    counts = state_counts(study)
    n_trials = study.user_attrs.get("n_trials")
    print(f"study {study.study_name} ({study.user_attrs.get('task', '?')}, {study.direction.name.lower()} "
          f"{study.user_attrs.get('metric', 'value')})")
    print("  " + "  ".join(f"{k}={counts[k]}" for k in ("complete", "pruned", "failed", "running", "waiting")))
    print(f"  finished {counts['finished']}/{n_trials or '?'}   best {counts['best'] if counts['best'] is not None else '-'}")
    rate = _trials_per_hour(study)
    if rate:
        eta = ""
        if n_trials and counts["finished"] < n_trials:
            eta = f"   ETA {(n_trials - counts['finished']) / rate:.1f} h"
        print(f"  {rate:.1f} trials/hour{eta}")


def _trials_per_hour(study) -> float | None:
    from optuna.trial import TrialState

    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    if len(done) < 2:
        return None
    start = min(t.datetime_start for t in done)
    end = max(t.datetime_complete for t in done)
    hours = (end - start).total_seconds() / 3600
    return len(done) / hours if hours > 0 else None


def best(study_name: str, storage: str | None) -> None:
    study, _ = _study_and_spec(study_name, storage)
    _print_best(study)


def _print_best(study) -> None:
    try:
        trial = study.best_trial
    except ValueError:
        print(f"study {study.study_name} has no completed trial yet")
        return
    attrs = trial.user_attrs
    print(f"best trial {trial.number}: {study.user_attrs.get('metric', 'value')} = {trial.value:.4f}")
    print("  params: " + ", ".join(f"{k}={v}" for k, v in trial.params.items()))
    if metrics := attrs.get("metrics"):
        print("  metrics: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
    checkpoint = attrs.get("checkpoint")
    if checkpoint and Path(checkpoint).exists():
        print(f"  checkpoint: {checkpoint}")


def export(study_name: str, storage: str | None, fmt: str, out: str | None) -> None:
    study, _ = _study_and_spec(study_name, storage)
    rows = [_trial_row(t) for t in study.get_trials(deepcopy=False)]
    stream = open(out, "w", newline="") if out else sys.stdout
    try:
        if fmt == "json":
            json.dump(rows, stream, indent=2, default=str)
            stream.write("\n")
        else:
            columns = list(dict.fromkeys(key for row in rows for key in _flat(row)))
            writer = csv.DictWriter(stream, fieldnames=columns)
            writer.writeheader()
            writer.writerows(_flat(row) for row in rows)
    finally:
        if out:
            stream.close()
    if out:
        print(f"wrote {len(rows)} trials to {out}", file=sys.stderr)


def _trial_row(trial) -> dict:
    def iso(moment: datetime | None) -> str | None:
        return moment.isoformat() if moment else None

    return {"number": trial.number, "state": trial.state.name, "value": trial.value,
            "datetime_start": iso(trial.datetime_start), "datetime_complete": iso(trial.datetime_complete),
            "params": dict(trial.params), "user_attrs": dict(trial.user_attrs)}


def _flat(row: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in row.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def dashboard(spec_or_storage: str | None, storage: str | None, artifact_dir: str | None, host: str, port: int) -> None:
    from optuna.artifacts import FileSystemArtifactStore
    from optuna_dashboard import run_server

    from hpo.study import get_storage, mask_url

    output_dir = "_runs/studies"
    if spec_or_storage and spec_or_storage.endswith((".yaml", ".yml")):
        spec = load_spec(spec_or_storage, (), storage)
        url, output_dir = spec.storage, spec.output_dir
    else:
        url = storage or spec_or_storage or os.environ.get(STORAGE_ENV) or DEFAULT_STORAGE
    artifacts = Path(artifact_dir or Path(output_dir) / "artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    print(f"optuna-dashboard for {mask_url(url)} at http://{host}:{port}/ (artifacts: {artifacts}); Ctrl-C stops it")
    run_server(get_storage(url), host=host, port=port,
               artifact_store=FileSystemArtifactStore(str(artifacts)))
