"""What each CLI subcommand does. ``cli`` parses arguments, calls one of these and prints
what it returns; the long-running ones (tune, worker, dashboard) report as they go."""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from hpo.errors import RunStopped, UsageError
from hpo.outputs import UID_DIGITS, recorded_owner
from hpo.process import await_go, exit_with_parent, process_exists, redact
from hpo.run.preflight import preflight
from hpo.spec import DEFAULT_OUTPUT_DIR, SpecError, load_spec, parse_override, resolve_storage

log = logging.getLogger(__name__)

Say = Callable[[str], None]


@dataclass(frozen=True)
class Validated:
    notes: list[str]
    summary: str


def validate(spec_path: str, overrides: Sequence[str], storage: str | None) -> Validated:
    spec = load_spec(spec_path, overrides, storage)
    notes = preflight(spec) + _search_notes(spec)
    return Validated(notes, f"{spec_path}: valid — study {spec.name!r}, {spec.n_trials} trials, "
                            f"{len(spec.search_space)} searched parameters, storage {redact(spec.storage)}")


def _search_notes(spec) -> list[str]:
    """The conditional parameters, grouped by condition, and the warm start."""
    by_condition: dict[str, list[str]] = {}
    for name, param in spec.search_space.items():
        if param.when:
            by_condition.setdefault(param.condition_text(), []).append(name)
    notes = [f"{', '.join(names)}: sampled only when {condition}" for condition, names in by_condition.items()]
    if spec.warm_start:
        notes.append(f"warm start: {len(spec.warm_start)} parameter sets, queued once when the study is created")
    return notes


def enqueue(spec_path: str, assignments: Sequence[str], storage: str | None, allow_spec_change: bool = False) -> str:
    """Queue one parameter set (``key=value`` per searched parameter; the rest is sampled)
    on the spec's study, created if need be; returns what was done, in one line."""
    spec = load_spec(spec_path, (), storage)
    point = {}
    for text in assignments:
        try:
            keys, value = parse_override(text)
        except SpecError:
            raise SpecError(f"--set {text!r}: expected the form key=value, e.g. --set learning_rate=2e-5") from None
        if len(keys) != 1:
            raise SpecError(f"--set {text}: name a searched parameter, e.g. --set learning_rate=2e-5")
        if keys[0] in point:  # which one was meant? Not the last by accident
            raise SpecError(f"--set {keys[0]}: given twice ({point[keys[0]]}, then {value}); give it once")
        point[keys[0]] = value
    if problem := spec.point_problem(point):  # before the study is opened: bad input creates nothing
        raise SpecError(f"--set {problem[0]}: {problem[1]}" if problem[0] else f"--set: {problem[1]}")
    from hpo.study import enqueue as enqueue_point
    from hpo.study import open_study

    study = open_study(spec, allow_spec_change=allow_spec_change, adopt_spec=False)  # queues; never changes the spec
    shown = ", ".join(f"{k}={v}" for k, v in spec.typed_point(point).items())
    if enqueue_point(study, spec, point):
        return f"queued {shown} on study {spec.name!r}; the next free worker runs it"
    return f"study {spec.name!r} already has a trial with {shown}; nothing queued"


def tune(spec_path: str, overrides: Sequence[str], storage: str | None, workers: int,
         restart_dead: bool, progress: bool = True, say: Say = print,
         allow_spec_change: bool = False, threads: int | None = None,
         memory_per_worker_mb: int | None = None) -> tuple[int, dict]:
    """Run the study with ``workers`` supervised processes (``threads`` CPU threads each;
    default: the cores split evenly; ``memory_per_worker_mb`` host memory each, default the
    machine's split evenly); returns the exit code and, as ``best`` does, the study's best trial."""
    from hpo.run.launcher import (
        StudyProgress,
        Supervisor,
        available_cpus,
        visible_gpus,
        worker_launches,
    )
    from hpo.study import open_study, start_time_budget
    from hpo.train.memory import memory_share_mb

    if workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")
    spec = load_spec(spec_path, overrides, storage)
    launches = worker_launches(spec_path, workers, storage=spec.storage, overrides=overrides,
                               gpus_per_trial=spec.gpus_per_trial, threads=threads,
                               cpu_count=available_cpus(), gpu_ids=visible_gpus(),
                               memory_mb=memory_per_worker_mb or memory_share_mb(workers))
    supervisor = Supervisor(launches, restart_dead=restart_dead)
    supervisor.start()  # they load torch and transformers while the checks below run, then wait for go
    try:
        preflight(spec)
        # Created here, so workers never race to create it; a changed spec is recorded before they start.
        study = open_study(spec, allow_spec_change=allow_spec_change)
        deadline = start_time_budget(study, spec.timeout)  # before the workers go: they read it once
        _prepare_tracking(spec)
    except BaseException:  # a failed check or Ctrl-C: the waiting workers end, having touched nothing
        supervisor.abandon()
        raise
    budget = f", a time budget until {time.strftime('%H:%M:%S', time.localtime(deadline))}" if deadline else ""
    say(f"study {spec.name!r} on {redact(spec.storage)}: {spec.n_trials} trials, {workers} workers{budget}")
    bar = StudyProgress(study, spec.n_trials, enabled=progress, max_retry=spec.heartbeat.max_retry)
    try:
        code = supervisor.run(bar)
    finally:
        bar.close()
    if supervisor.stopped_because:
        raise RunStopped(f"stopped study {spec.name!r}: {supervisor.stopped_because}; fix that and run "
                         "`hpo tune` again to resume")
    return code, {"study": study.study_name, "best": best_trial(study) if code == 0 else None}


@dataclass(frozen=True)
class Submitted:
    job_id: str
    script: Path
    log_pattern: str


def submit_slurm(spec_path: str, overrides: Sequence[str], storage: str | None, workers: int,
                 cpus_per_worker: int, gpus_per_worker: int = 0, partition: str | None = None,
                 time_limit: str | None = None, allow_spec_change: bool = False, say: Say = print) -> Submitted:
    """Create the study here (preflight included, as ``tune`` does), so array tasks never
    race to create it; then write the job-array script and sbatch it."""
    from hpo.run.slurm import ArrayJob, job_script, sbatch_command, submit_script
    from hpo.study import open_study

    spec = load_spec(spec_path, overrides, storage)
    if spec.storage.startswith("sqlite"):
        raise UsageError(f"storage {redact(spec.storage)} is SQLite, which workers on several nodes cannot "
                         "share; pass --storage postgresql://user@dbhost:5432/hpo (or set HPO_STORAGE)")
    if spec.gpus_per_trial > 1 and gpus_per_worker < spec.gpus_per_trial:
        raise UsageError(f"gpus_per_trial={spec.gpus_per_trial} needs --gpus-per-worker {spec.gpus_per_trial} "
                         f"or more (got {gpus_per_worker})")
    preflight(spec)
    open_study(spec, allow_spec_change=allow_spec_change)
    _prepare_tracking(spec)
    log_dir = (Path(spec.output_dir) / "slurm").resolve()
    log_dir.mkdir(parents=True, exist_ok=True)  # Slurm does not create it, and a task without it has no log
    job = ArrayJob(spec_path=str(Path(spec_path).resolve()), study=spec.name, workers=workers,
                   cpus_per_worker=cpus_per_worker, gpus_per_worker=gpus_per_worker, partition=partition,
                   time=time_limit, log_dir=str(log_dir), workdir=os.getcwd(), python=sys.executable,
                   overrides=tuple(overrides))
    script = log_dir / f"{spec.name}.sbatch"
    script.write_text(job_script(job), encoding="utf-8")
    cmd, env = sbatch_command(script, spec.storage)
    job_id = submit_script(cmd, env, spec.storage)
    logs = f"{log_dir}/{spec.name}-{job_id}_<task>.log"
    say(f"submitted job array {job_id}: {workers} workers on study {spec.name!r} ({redact(spec.storage)}); "
        f"logs: {logs}")
    return Submitted(job_id, script, logs)


def _prepare_tracking(spec) -> None:
    """The MLflow experiment, like the study, exists before any worker starts: workers
    never race to create it (or a fresh database backend's tables)."""
    if spec.tracking.mlflow:
        from hpo.tracking import Tracker

        Tracker(spec.tracking.mlflow, spec.name).prepare()


def worker(spec_path: str, overrides: Sequence[str], storage: str | None, name: str | None,
           threads: int | None, parent_pid: int | None = None, allow_spec_change: bool = False,
           wait_for_go: bool = False, memory_limit_mb: int | None = None) -> int:
    """One worker process: its thread budget is applied here, once, for the whole process.
    Started by ``hpo tune`` (``parent_pid``), it stops as SIGTERM stops it when the launcher
    dies; with ``wait_for_go`` it loads its libraries, then waits for the launcher's go on stdin."""
    import socket

    if parent_pid:
        if not process_exists(parent_pid):  # a mistyped PID, or a launcher already gone: nothing to follow
            raise UsageError(f"--parent-pid {parent_pid}: no such process; pass the PID of the process this "
                             "worker should stop with (hpo tune passes its own), or leave the flag out")
        exit_with_parent(parent_pid)  # first: a launcher killed during our start-up is noticed too
    from hpo.run.worker import WorkerStopped, run_worker

    spec = load_spec(spec_path, overrides, storage)
    from hpo.models.hardware import check_gpus

    check_gpus(spec.gpus_per_trial)
    name = name or f"{socket.gethostname()}/{os.getpid()}"
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [{name}] %(message)s", stream=sys.stdout)
    for noisy in ("optuna", "transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if threads:
        import torch

        torch.set_num_threads(threads)
    from hpo.train.memory import memory_share_mb, set_memory_ceiling

    set_memory_ceiling(memory_limit_mb or memory_share_mb(1))  # alone on the machine unless told
    if wait_for_go and not await_go():
        return 0
    try:
        ran = run_worker(spec, worker=name, allow_spec_change=allow_spec_change)
    except WorkerStopped as exc:
        log.error("%s", exc)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    log.info("worker %s done after %d trials", name, ran)
    return 0


def status(study_ref: str, storage: str | None) -> dict:
    """Counts by state, the best value, the pace and what remains, and where each running trial is."""
    from hpo.study import (
        load_study_ref,
        running_trials,
        state_counts,
        study_deadline,
        trials_per_hour,
    )

    study = load_study_ref(study_ref, storage)
    counts = state_counts(study)
    n_trials = study.user_attrs.get("n_trials")
    rate = trials_per_hour(study)
    remaining = max(n_trials - counts["finished"], 0) if n_trials else None
    running = [{"number": t.number, "worker": t.user_attrs.get("worker"), **t.user_attrs.get("progress", {})}
               for t in running_trials(study)]
    return {"study": study.study_name, "task": study.user_attrs.get("task", "?"),
            "direction": study.direction.name.lower(), "metric": study.user_attrs.get("metric", "value"),
            "n_trials": n_trials, "counts": counts, "trials_per_hour": rate,
            "eta_hours": remaining / rate if rate and remaining else None, "running": running,
            "budget_seconds_left": None if (deadline := study_deadline(study)) is None else deadline - time.time()}


def best(study_ref: str, storage: str | None) -> dict:
    from hpo.study import load_study_ref

    study = load_study_ref(study_ref, storage)
    return {"study": study.study_name, "best": best_trial(study)}


def best_trial(study) -> dict | None:
    """The best trial's number, value, parameters, metrics and checkpoint (if it still exists
    and is this trial's); ``checkpoint_refused`` says why an existing one is not shown."""
    try:
        trial = study.best_trial
    except ValueError:
        return None
    checkpoint = trial.user_attrs.get("checkpoint")
    if not checkpoint or not Path(checkpoint).exists():
        checkpoint = None
    refused = _foreign_checkpoint(study, trial.number, checkpoint) if checkpoint else None
    return {"number": trial.number, "metric": study.user_attrs.get("metric", "value"), "value": trial.value,
            "params": dict(trial.params), "metrics": trial.user_attrs.get("metrics") or {},
            "checkpoint": None if refused else checkpoint, "checkpoint_refused": refused}


def _foreign_checkpoint(study, number: int, checkpoint: str) -> str | None:
    """Why ``checkpoint`` is not trial ``number``'s of ``study``, or None if it is.

    Its folder's metrics.json must name this study's uid and this trial: a study of the
    same name elsewhere (another storage, or deleted and re-created) may have written
    the folder since, and its weights would be shown beside these parameters.
    """
    from hpo.study import study_uid

    uid = study_uid(study)
    owner_uid, owner_trial = recorded_owner(checkpoint)
    if uid is not None and (owner_uid, owner_trial) == (uid, number):
        return None
    if owner_uid is None:
        return (f"the checkpoint at {checkpoint} is not recorded as this study's "
                "(no study uid in its metrics.json); not shown")
    if owner_uid != uid:
        return (f"the checkpoint at {checkpoint} belongs to another study "
                f"(its metrics.json names study {str(owner_uid)[:UID_DIGITS]}); not shown")
    return f"the checkpoint at {checkpoint} belongs to trial {owner_trial}, not trial {number}; not shown"


def export(study_ref: str, storage: str | None, fmt: str) -> tuple[str, int]:
    """Every trial as CSV or JSON text, and how many trials it holds."""
    from hpo.study import load_study_ref

    study = load_study_ref(study_ref, storage)
    rows = [_trial_row(t) for t in study.get_trials(deepcopy=False)]
    if fmt == "json":
        return json.dumps(rows, indent=2, default=str) + "\n", len(rows)
    text = io.StringIO(newline="")
    columns = list(dict.fromkeys(key for row in rows for key in _flat(row)))
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(_flat(row) for row in rows)
    return text.getvalue(), len(rows)


def write_export(out: str, text: str, study_ref: str) -> None:
    """``text`` at ``out``, whole or not at all; never over the study file it was read from,
    nor over a database (the study's storage)."""
    from hpo.outputs import atomic_text

    protected = {study_ref: "the study file this export reads"} if Path(study_ref).is_file() else {}
    try:
        with atomic_text(out, protected=protected) as stream:
            stream.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror}; pass --out to a writable file") from None


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


def dashboard(spec_or_storage: str | None, storage: str | None, artifact_dir: str | None, host: str, port: int,
              say: Say = print) -> None:
    from hpo.study import ARTIFACT_DIR, serve_dashboard

    output_dir = DEFAULT_OUTPUT_DIR
    if spec_or_storage and spec_or_storage.endswith((".yaml", ".yml")):
        spec = load_spec(spec_or_storage, (), storage)
        url, output_dir = spec.storage, spec.output_dir
    else:
        url = resolve_storage(storage or spec_or_storage)
    artifacts = Path(artifact_dir or Path(output_dir) / ARTIFACT_DIR)
    serve_dashboard(url, artifacts, host=host, port=port, ready=lambda: say(
        f"optuna-dashboard for {redact(url)} at http://{host}:{port}/ (artifacts: {artifacts}); Ctrl-C stops it"))


def predict(model_dir: str, input_path: str, out: str, batch_size: int, device: str, top_k: int,
            progress: bool = True, force: bool = False):
    """``hpo predict``: every post of ``input_path`` through the model, a CSV at ``out`` and a
    tqdm bar of posts (stderr) meanwhile; returns the ``FileSummary`` for the throughput line."""
    from contextlib import ExitStack

    from tqdm import tqdm

    from hpo.models.loading import hide_progress_bars
    from hpo.predict import predict_file

    if not progress:
        hide_progress_bars()
    with ExitStack() as bars:  # the bar starts once the posts are read and the model loaded
        def start(total: int):
            return bars.enter_context(tqdm(total=total, unit="post", disable=not progress, dynamic_ncols=True)).update

        return predict_file(model_dir, input_path, out, batch_size, device, top_k or None, progress=start,
                            force=force)


def explain(criteria_dir: str, evidence_dir: str, input_path: str, out: str, html: str | None, batch_size: int,
            device: str, top_k: int, progress: bool = True, force: bool = False):
    """``hpo predict --criteria --evidence``: the joined prediction of every post of
    ``input_path`` as JSON lines at ``out`` (and the HTML report at ``html``), with a tqdm bar
    of posts through both halves; returns the ``ExplainSummary`` for the throughput line."""
    from contextlib import ExitStack

    from tqdm import tqdm

    from hpo.explain import explain_file
    from hpo.models.loading import hide_progress_bars

    if not progress:
        hide_progress_bars()
    with ExitStack() as bars:
        def start(total: int):
            return bars.enter_context(tqdm(total=total, unit="post", desc="criteria, then evidence",
                                           disable=not progress, dynamic_ncols=True)).update

        return explain_file(criteria_dir, evidence_dir, input_path, out, html, batch_size, device, top_k or None,
                            progress=start, force=force)
