"""What this machine can run: `hpo tune` checks its workers against it before a process starts.

`--workers 1000` on 2 cores started a thousand processes (load average 103), each under a 21 MiB
memory ceiling that every trial would cross; `--memory-per-worker 5T` on a 24 GiB machine turned
the protection off. Both are refused here in one line naming the fix, as `--threads` is.
"""

from __future__ import annotations

from hpo.errors import UsageError
from hpo.train.memory import MEMORY_SHARE

# A worker's own floor: torch, transformers and hpo's modules alone are ~510 MiB resident
# (measured here), before a model, a batch or the tokenized data; below this every trial fails.
MIN_WORKER_MEMORY_MB = 1024


def check_capacity(
    workers: int,
    *,
    cpus: int,
    gpu_groups: int = 0,
    memory_mb: int | None,
    machine_mb: float | None,
    memory_given: bool = False,
    memory_flag: str = "--memory-per-worker",
) -> None:
    """Refuse ``workers`` this machine cannot run: more than its cores (or its GPU groups, a
    worker each, where there are more of those), a host-memory ceiling per worker
    (``memory_mb``; ``memory_given``: from --memory-per-worker) under what a worker needs, or
    ceilings that add up to more than the machine has (``machine_mb``), which no ceiling would
    then protect. Unknown memory (None) is not checked. ``memory_flag``: the flag a message
    names (`hpo worker` has --memory-limit)."""
    slots = max(cpus, gpu_groups)
    if workers > slots:
        has = f"{cpus} CPU cores" + (f" and {gpu_groups} GPU groups" if gpu_groups else "")
        raise UsageError(
            f"--workers {workers}: this machine has {has}, so it runs at most {slots} workers at "
            f"once; pass --workers {slots} or fewer, or start more on other machines "
            "(hpo worker, hpo submit --slurm)"
        )
    if memory_mb is None or machine_mb is None:
        return
    if memory_mb < MIN_WORKER_MEMORY_MB:
        fits = max(1, int(machine_mb * MEMORY_SHARE // MIN_WORKER_MEMORY_MB))
        fix = (
            f"pass {memory_flag} {MIN_WORKER_MEMORY_MB}M or more"
            if memory_given
            else f"run at most {fits} workers here"
        )
        raise UsageError(
            f"each worker would get a host-memory ceiling of {memory_mb} MiB, under the "
            f"{MIN_WORKER_MEMORY_MB} MiB a worker needs to load torch and a model (every trial "
            f"would fail); {fix}"
        )
    if workers * memory_mb > machine_mb:
        raise UsageError(
            f"{memory_flag} {memory_mb}M for {workers} worker(s) is more than this "
            f"machine's {machine_mb:.0f} MiB: the kernel would kill a worker before its ceiling "
            f"stopped it; pass at most {int(machine_mb // workers)}M, or leave it out "
            f"({MEMORY_SHARE:.0%} of the machine split between the workers)"
        )
