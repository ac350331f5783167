"""A study's workers as a Slurm job array (``hpo submit --slurm``): the study is created here,
checks first, so the array's tasks never race to create it; then the script is written and
sbatched."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpo.errors import UsageError
from hpo.run.slurm import ArrayJob, job_script, sbatch_command, submit_script
from hpo.run.start import start_study
from hpo.spec import load_spec


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
    # the array's tasks start no trial the rest of the budget cannot fit: queue time counts
    started = start_study(spec, allow_spec_change)
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
    say(
        f"submitted job array {job_id}: {workers} workers on study {spec.name!r} ({spec.storage})"
        f"{started.budget_text(queued=True)}; logs: {logs}"
    )
    return Submitted(job_id, script, logs)
