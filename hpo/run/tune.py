"""A study on this machine (``hpo tune``): N supervised worker processes, started while the
checks run, released together once the study exists, followed to the end with a progress bar."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from hpo.errors import RunStopped
from hpo.option_types import Count, MemoryMb, Seconds, Threads
from hpo.run.start import start_study
from hpo.spec import load_spec


class TuneOptions(BaseModel):
    """How ``hpo tune`` runs a study, beside its spec: the processes and what each may use;
    one record that the command's flags and ``hpo.tune``'s keywords both build, checked by
    pydantic when it is made (as ``FinalizeOptions``), so ``tune`` checks none of it again."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    workers: Count = 1
    threads: Threads | None = None  # CPU threads per worker; None: the cores split evenly
    memory_per_worker_mb: MemoryMb | None = None  # None: the machine's memory split evenly
    restart_dead: bool = False  # start a replacement for a worker that died
    allow_spec_change: bool = False
    progress: bool = True  # a progress bar; False: logs only
    timeout: Seconds | None = None  # the study's wall-clock budget; None: the spec's


def tune(
    spec_path: str,
    overrides: Sequence[str],
    storage: str | None,
    options: TuneOptions,
    say: Callable[[str], None] = print,
) -> tuple[int, object]:
    """Run the study of ``spec_path`` (with ``overrides`` and ``storage``) as ``options``
    say; returns the exit code and the (Optuna) study."""
    from hpo.process import available_cpus, free_cpus, threads_per_process
    from hpo.run.capacity import check_capacity
    from hpo.run.launcher import Supervisor, visible_gpus, worker_launches
    from hpo.run.progress import StudyProgress
    from hpo.run.watcher import StudyWatcher
    from hpo.study import finished_study
    from hpo.study.records import trial_census, write_study_note
    from hpo.train.memory import machine_memory_mb, memory_share_mb

    workers = options.workers
    spec = load_spec(spec_path, overrides, storage, timeout=options.timeout)
    if (done := finished_study(spec, options.allow_spec_change)) is not None:
        finished = trial_census(done)["finished"]  # more than n_trials if an earlier run set more
        said = "n_trials" if finished == spec.n_trials else f"n_trials is {spec.n_trials}"
        say(
            f"study {spec.name!r} is done: it holds {finished} finished trials ({said}); "
            "raise n_trials (--set n_trials=N) to run more"
        )
        return 0, done
    cpus, gpu_ids = available_cpus(), visible_gpus()
    memory_mb = options.memory_per_worker_mb or memory_share_mb(workers)
    check_capacity(  # before any process starts
        workers,
        cpus=cpus,
        gpu_groups=len(gpu_ids) // spec.gpus_per_trial,
        memory_mb=memory_mb,
        machine_mb=machine_memory_mb(),
        memory_given=options.memory_per_worker_mb is not None,
    )
    free = free_cpus()  # threads: the cores other work leaves idle, split among the workers
    threads = threads_per_process(workers, options.threads, free.cpus)
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
    supervisor = Supervisor(launches, restart_dead=options.restart_dead)
    # they load torch and transformers while the checks below run, then wait for go
    supervisor.start()
    try:  # while the workers wait: they never race to create the study or start its clock
        started = start_study(spec, options.allow_spec_change, note=False)
    except BaseException:  # a failed check or Ctrl-C: the waiting workers end, touching nothing
        supervisor.abandon()
        raise
    study = started.study
    say(
        f"study {spec.name!r} on {spec.storage}: {spec.n_trials} trials, {workers} workers"
        f"{started.budget_text()}"
    )
    if options.threads is None and not gpu_ids and (line := free.words(threads, "a worker")):
        say(line)  # once the workers go: nothing is said before a refusal
    bar = StudyProgress(spec.n_trials, enabled=options.progress)
    watcher = StudyWatcher(study, spec.n_trials, bar.write, max_retry=spec.heartbeat.max_retry)
    try:
        code = supervisor.run(bar, lambda: write_study_note(study, spec), watcher)
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
