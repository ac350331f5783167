"""A study on this machine (``hpo tune``): N supervised worker processes, started while the
checks run, released together once the study exists, followed to the end with a progress bar."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from hpo.errors import RunStopped, UsageError
from hpo.run.preflight import preflight
from hpo.spec import load_spec
from hpo.tracking import Tracker


def tune(
    spec_path: str,
    overrides: Sequence[str],
    storage: str | None,
    workers: int,
    restart_dead: bool,
    progress: bool = True,
    say: Callable[[str], None] = print,
    allow_spec_change: bool = False,
    threads: int | None = None,
    memory_per_worker_mb: int | None = None,
) -> tuple[int, object]:
    """Run the study with ``workers`` supervised processes (``threads`` CPU threads each;
    default: the cores split evenly; ``memory_per_worker_mb`` host memory each, default the
    machine's split evenly); returns the exit code and the (Optuna) study."""
    from hpo.run.capacity import check_capacity
    from hpo.run.launcher import (
        StudyProgress,
        Supervisor,
        available_cpus,
        visible_gpus,
        worker_launches,
    )
    from hpo.study import open_study, start_time_budget
    from hpo.train.memory import machine_memory_mb, memory_share_mb

    if workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")
    spec = load_spec(spec_path, overrides, storage)
    cpus, gpu_ids = available_cpus(), visible_gpus()
    memory_mb = memory_per_worker_mb or memory_share_mb(workers)
    check_capacity(  # before any process starts
        workers,
        cpus=cpus,
        gpu_groups=len(gpu_ids) // spec.gpus_per_trial,
        memory_mb=memory_mb,
        machine_mb=machine_memory_mb(),
        memory_given=memory_per_worker_mb is not None,
    )
    launches = worker_launches(
        spec_path,
        workers,
        storage=spec.storage,
        overrides=overrides,
        gpus_per_trial=spec.gpus_per_trial,
        threads=threads,
        cpu_count=cpus,
        gpu_ids=gpu_ids,
        memory_mb=memory_mb,
    )
    supervisor = Supervisor(launches, restart_dead=restart_dead)
    # they load torch and transformers while the checks below run, then wait for go
    supervisor.start()
    try:
        preflight(spec)
        # Created here, so workers never race to create it; a changed spec is recorded before
        # they start.
        study = open_study(spec, allow_spec_change=allow_spec_change)
        # before the workers go: they read it once
        deadline = start_time_budget(study, spec.timeout)
        Tracker(
            spec.tracking.mlflow, spec.name
        ).prepare()  # as the study: workers never race to create it
    except (
        BaseException
    ):  # a failed check or Ctrl-C: the waiting workers end, having touched nothing
        supervisor.abandon()
        raise
    budget = (
        f", a time budget until {time.strftime('%H:%M:%S', time.localtime(deadline))}"
        if deadline
        else ""
    )
    say(f"study {spec.name!r} on {spec.storage}: {spec.n_trials} trials, {workers} workers{budget}")
    bar = StudyProgress(study, spec.n_trials, enabled=progress, max_retry=spec.heartbeat.max_retry)
    try:
        code = supervisor.run(bar)
    finally:
        bar.close()
    if supervisor.stopped_because and not supervisor.resumable:
        raise RunStopped(
            f"{supervisor.stopped_because}; its workers have stopped (`hpo tune` again starts it "
            "anew)"
        )
    if supervisor.stopped_because:
        raise RunStopped(
            f"stopped study {spec.name!r}: {supervisor.stopped_because}; fix that and run "
            "`hpo tune` again to resume"
        )
    return code, study
