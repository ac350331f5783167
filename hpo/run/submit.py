"""A study's workers as a Slurm job array (``hpo submit --slurm``): the study is created here,
checks first, so the array's tasks never race to create it; then the script is written and
sbatched."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpo.errors import UsageError
from hpo.run.preflight import preflight
from hpo.run.slurm import ArrayJob, job_script, sbatch_command, submit_script
from hpo.spec import load_spec
from hpo.tracking import Tracker


@dataclass(frozen=True)
class Submitted:
    job_id: str
    script: Path
    log_pattern: str


def submit_slurm(
    spec_path: str,
    overrides: Sequence[str],
    storage: str | None,
    workers: int,
    cpus_per_worker: int,
    gpus_per_worker: int = 0,
    partition: str | None = None,
    time_limit: str | None = None,
    timeout: float | None = None,
    allow_spec_change: bool = False,
    say: Callable[[str], None] = print,
) -> Submitted:
    """Create the study here (preflight included, as ``tune`` does), so array tasks never
    race to create it; then write the job-array script and sbatch it."""
    from hpo.study import open_study, start_time_budget

    spec = load_spec(spec_path, overrides, storage, timeout=timeout)
    if spec.storage.is_sqlite:
        raise UsageError(
            f"storage {spec.storage} is SQLite, which workers on several nodes cannot "
            "share; pass --storage postgresql://user@dbhost:5432/hpo (or set HPO_STORAGE)"
        )
    if spec.gpus_per_trial > 1 and gpus_per_worker < spec.gpus_per_trial:
        raise UsageError(
            f"gpus_per_trial={spec.gpus_per_trial} needs --gpus-per-worker {spec.gpus_per_trial} "
            f"or more (got {gpus_per_worker})"
        )
    preflight(spec, notes=False)
    study = open_study(spec, allow_spec_change=allow_spec_change)
    # as `hpo tune` does, from the moment the study is open: the array's tasks read it and start
    # no trial the rest of the budget cannot fit (time spent waiting in the queue counts)
    deadline = start_time_budget(study, spec.timeout)
    Tracker(
        spec.tracking.mlflow, spec.name
    ).prepare()  # as the study: the tasks never race to create it
    log_dir = (Path(spec.output_dir) / "slurm").resolve()
    # Slurm does not create it, and a task without it has no log
    log_dir.mkdir(parents=True, exist_ok=True)
    job = ArrayJob(
        spec_path=str(Path(spec_path).resolve()),
        study=spec.name,
        workers=workers,
        cpus_per_worker=cpus_per_worker,
        gpus_per_worker=gpus_per_worker,
        partition=partition,
        time=time_limit,
        log_dir=str(log_dir),
        workdir=os.getcwd(),
        python=sys.executable,
        overrides=tuple(overrides),
    )
    script = log_dir / f"{spec.name}.sbatch"
    script.write_text(job_script(job), encoding="utf-8")
    cmd, env = sbatch_command(script, spec.storage)
    job_id = submit_script(cmd, env, spec.storage)
    logs = f"{log_dir}/{spec.name}-{job_id}_<task>.log"
    budget = (
        f", a time budget until {time.strftime('%H:%M:%S', time.localtime(deadline))} (queue "
        "time included)"
        if deadline
        else ""
    )
    say(
        f"submitted job array {job_id}: {workers} workers on study {spec.name!r} ({spec.storage})"
        f"{budget}; logs: {logs}"
    )
    return Submitted(job_id, script, logs)
