"""Workers as a Slurm job array: one array task, one ``hpo worker`` on the study.

``job_script`` writes the sbatch script and ``sbatch_command`` the sbatch call as pure
functions (tested without a cluster); ``submit_script`` is the thin part that runs sbatch.
The storage URL travels in the environment (sbatch exports it to every task), never in
the script, so a password given with --storage is not written to disk.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpo.errors import UsageError
from hpo.spec import set_flags
from hpo.storage_url import ENV as STORAGE_ENV
from hpo.storage_url import StorageUrl
from hpo.train.child import QUIET_ENV, THREAD_FLAG, THREAD_VARIABLES

STOP_WARNING_SECONDS = 60  # before the time limit: enough to re-queue a running trial and exit
SBATCH_SECONDS = 60  # sbatch answers in a second; a controller that does not is down


@dataclass(frozen=True)
class ArrayJob:
    """What one ``hpo submit --slurm`` asks of Slurm."""

    spec_path: str  # absolute: the tasks may start in another directory
    study: str
    workers: int
    cpus_per_worker: int
    log_dir: str  # absolute; one log per task, ``<study>-<job>_<task>.log``
    # the tasks start here, so relative paths in the spec mean what they meant at submission
    workdir: str
    python: str  # the interpreter that has hpo installed, on every node (a shared file system)
    overrides: Sequence[str] = ()
    gpus_per_worker: int = 0
    partition: str | None = None
    time: str | None = None


def job_script(job: ArrayJob) -> str:
    """The sbatch script for ``job``: directives, then each task execs one worker."""
    for name, path in (("the log folder", job.log_dir), ("the working directory", job.workdir)):
        if any(c.isspace() for c in path):  # #SBATCH lines cannot quote a path
            raise UsageError(
                f"{name} {path!r} holds whitespace, which an #SBATCH line cannot carry; "
                "use a path without spaces (output_dir, or the directory you submit from)"
            )
    directives = [
        f"--job-name=hpo-{job.study}",
        f"--array=0-{job.workers - 1}",
        "--ntasks=1",
        f"--cpus-per-task={job.cpus_per_worker}",
        *([f"--gres=gpu:{job.gpus_per_worker}"] if job.gpus_per_worker else []),
        *([f"--partition={job.partition}"] if job.partition else []),
        *([f"--time={job.time}"] if job.time else []),
        # SIGTERM to the worker a minute before the time limit (or on pre-emption's grace):
        # it re-queues its running trial and exits; another task or a later job runs it.
        f"--signal=B:TERM@{STOP_WARNING_SECONDS}",
        "--export=ALL",  # HPO_STORAGE (and PATH, PYTHONPATH, HF_HOME) from the submitting shell
        f"--chdir={job.workdir}",
        f"--output={job.log_dir}/{job.study}-%A_%a.log",
    ]
    # --set storage=… would put the URL in the script; HPO_STORAGE already carries the resolved one.
    worker = [job.python, "-m", "hpo", "worker", job.spec_path]
    command = " ".join(shlex.quote(part) for part in worker)
    # the child contract's flag and variables, with the thread count Slurm gives the task
    command += (
        ' --name "$(hostname -s)/${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"'
        f' {THREAD_FLAG} "$threads"'
    )
    command += "".join(f" {shlex.quote(part)}" for part in set_flags(job.overrides))
    exports = [f'{name}="$threads"' for name in THREAD_VARIABLES]
    exports += [f"{name}={value}" for name, value in QUIET_ENV.items()]
    return (
        "#!/bin/bash\n"
        f"# hpo workers for study {job.study}: each array task runs one worker until the study "
        "holds\n"
        "# n_trials finished trials, then exits 0. Written by `hpo submit --slurm`; to submit it "
        "again:\n"
        f"#   {STORAGE_ENV}=postgresql://user@dbhost:5432/hpo sbatch THIS_FILE\n"
        + "".join(f"#SBATCH {d}\n" for d in directives)
        + "set -euo pipefail\n"
        f': "${{{STORAGE_ENV}:?set {STORAGE_ENV} to the study database URL before sbatch}}"\n'
        'threads="${SLURM_CPUS_PER_TASK:-1}"  # the cores Slurm gave this task; '
        "GPUs: CUDA_VISIBLE_DEVICES\n"
        f"export {' '.join(exports)}\n"
        + "# exec: the worker is the batch shell itself, so the B:TERM signal above reaches it.\n"
        f"exec {command}\n"
    )


def sbatch_command(
    script: str | Path, storage: StorageUrl | str, base_env: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The sbatch call for a written script and its environment (a copy; the URL in it)."""
    env = dict(os.environ if base_env is None else base_env)
    env[STORAGE_ENV] = StorageUrl.of(storage).text
    # On the command line too: it beats an SBATCH_EXPORT=NONE in the user's environment.
    return ["sbatch", "--parsable", "--export=ALL", str(script)], env


def submit_script(cmd: Sequence[str], env: Mapping[str, str], storage: StorageUrl | str) -> str:
    """Run sbatch; returns the job id. Its refusals become one-line errors."""
    try:
        done = subprocess.run(
            list(cmd), env=dict(env), capture_output=True, text=True, timeout=SBATCH_SECONDS
        )
    except FileNotFoundError:
        raise UsageError(
            "sbatch not found: run `hpo submit --slurm` on a machine with Slurm's client "
            "commands (a login node)"
        ) from None
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"sbatch gave no answer in {SBATCH_SECONDS}s; is the Slurm controller up (`sinfo`)?"
        ) from None
    if done.returncode != 0:
        said = (
            done.stderr.strip() or done.stdout.strip() or f"exit code {done.returncode}"
        ).splitlines()[-1]
        raise UsageError(f"sbatch refused the job: {StorageUrl.of(storage).mask(said)}")
    return done.stdout.strip().split(";")[0]  # --parsable: "jobid" or "jobid;cluster"
