"""Finalize's retrainings: every planned run trained once, and kept once it has finished.

With one worker the runs train in this process. With more, each worker is a child process
(``hpo retrain``) that follows finalize out as ``hpo tune``'s workers follow ``hpo tune``:
started in a session of its own from the main thread, it gets SIGTERM from the kernel when
finalize dies, even by ``kill -9`` (``exit_with_parent``), and a Ctrl-C or SIGTERM of
finalize stops every child before finalize exits. No process pool: a pool's workers and
its resource trackers cannot be told to die with their parent.

The children share the runs by claiming each with a lock that the kernel releases when its
holder dies, so no run trains twice at once. A run writes ``result.json`` last; a rerun
trains only the runs without one. A run that is its trial's kept checkpoint (``reuse``) is
not trained at all: finalize links the checkpoint in before any child starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout
from tqdm import tqdm

from hpo.errors import RunStopped
from hpo.final.reuse import Reuse, link_checkpoint
from hpo.final.summary import RunResult
from hpo.outputs import write_json
from hpo.process import (
    free_cpus,
    interruptible,
    start_child,
    stop_children,
    threads_per_process,
)
from hpo.spec import StudySpec, load_spec, set_flags
from hpo.storage_url import StorageUrl
from hpo.train.child import ChildContract
from hpo.train.config import TrainConfig
from hpo.train.memory import memory_share_mb

PLAN_FILE = "plan.json"  # in runs/: the runs the children share
RESULT_FILE = "result.json"  # in a run's folder, written last: the run and its model are complete
CLAIM_FILE = "claim.lock"  # in a run's folder: locked while a process trains the run
# after Ctrl-C or SIGTERM, how long children get before SIGKILL (they have nothing to save)
STOP_SECONDS = 10
POLL_SECONDS = 0.5  # how often the progress bar counts finished runs
RELAY_DRAIN_SECONDS = 5  # how long a finished child's last lines get to reach the terminal
RUN_LOG = "train.log"  # in a run's folder: all its training logged, as a trial's train.log
RUN_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"  # a trial's train.log's

Say = Callable[[str], None]


@dataclass(frozen=True)
class Run:
    """One retraining: a configuration (the trial it comes from) with one seed, on the
    search's split or (``folds`` > 0, finalize --cv) on one fold of train + validation."""

    rank: int  # of the configuration in the study, 1 = best
    trial: int
    params: dict
    seed: int
    folds: int = 0  # K of --cv K; 0: the search's own split
    fold: int = 0  # the held-out fold, 0..K-1
    # at the trial's own seed: whether its kept checkpoint is this run (reuse.py); None: trained
    reuse: Reuse | None = None

    @property
    def name(self) -> str:
        base = f"trial_{self.trial}-seed_{self.seed}"
        return f"{base}-fold_{self.fold + 1}of{self.folds}" if self.folds else base

    @property
    def cv_fold(self) -> tuple[int, int] | None:
        return (self.folds, self.fold) if self.folds else None


def train_config(
    spec: StudySpec,
    params: dict,
    seed: int,
    checkpoint_dir: Path | None,
    cv_fold: tuple[int, int] | None = None,
) -> TrainConfig:
    config = spec.train_config(
        params, checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None
    )
    return dataclasses.replace(config, seed=seed, cv_fold=cv_fold)


def finished_runs(runs: Sequence[Run], runs_dir: Path) -> dict[str, RunResult]:
    return {
        run.name: RunResult.model_validate_json(path.read_text())
        for run in runs
        if (path := runs_dir / run.name / RESULT_FILE).exists()
    }


def retrain_all(
    spec: StudySpec,
    spec_path: str,
    overrides: Sequence[str],
    runs: Sequence[Run],
    runs_dir: Path,
    workers: int,
    progress: bool,
    say: Say,
    threads: int | None = None,
) -> dict[str, RunResult]:
    """Results of every run: read back where an earlier finalize finished them, trained
    otherwise, each process at ``threads`` CPU threads (None: the cores split evenly between
    them, as ``hpo tune`` splits them). Raises RunStopped when a retraining process died (the
    finished are kept)."""
    records = finished_runs(runs, runs_dir)
    pending = [run for run in runs if run.name not in records]
    pending = [run for run in pending if not _reused(run, runs_dir, say)]
    if records:
        say(
            f"resuming: {len(records)} of {len(runs)} retrainings already finished; "
            f"training the other {len(pending)}"
        )
    children = min(workers, len(pending))
    free = free_cpus()  # the cores other work leaves idle, split among the retrainings
    each = threads_per_process(max(children, 1), threads, free.cpus)
    if pending and threads is None and (line := free.words(each, "a retraining")):
        say(line)
    try:
        with tqdm(
            total=len(runs),
            initial=len(runs) - len(pending),
            unit="run",
            disable=not progress,
            dynamic_ncols=True,
        ) as bar:
            if children <= 1:
                # a worker's threads and memory ceiling, so a step past it backs off
                ChildContract(threads=each).apply()
                retrain_pending(spec, pending, runs_dir, on_done=lambda _: bar.update())
            else:
                # the children train every run they are given: none of these is reused
                plan = [dataclasses.asdict(dataclasses.replace(run, reuse=None)) for run in pending]
                write_json(runs_dir / PLAN_FILE, plan)
                launches = child_launches(
                    spec_path,
                    overrides,
                    runs_dir,
                    children,
                    threads=each,
                    storage=spec.storage,
                    memory_mb=memory_share_mb(children),
                )
                codes = _run_children(
                    launches, lambda: len(finished_runs(runs, runs_dir)), bar, say
                )
                records = finished_runs(runs, runs_dir)
                if missing := [run.name for run in runs if run.name not in records]:
                    raise RunStopped(
                        f"{len(missing)} of {len(runs)} retrainings did not finish "
                        "(retraining processes "
                        f"exited with {sorted(set(codes))}; the error is above); "
                        "fix that and run hpo finalize "
                        f"again: the {len(records)} finished are kept"
                    )
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: what is kept, and how to go on
        kept = len(finished_runs(runs, runs_dir))
        say(
            f"interrupted: {kept} of {len(runs)} retrainings kept; run hpo finalize again to resume"
        )
        raise
    return finished_runs(runs, runs_dir)


def retrain_pending(
    spec: StudySpec,
    runs: Sequence[Run],
    runs_dir: Path,
    on_done: Callable[[RunResult], None] | None = None,
) -> None:
    """Train each run that no process has finished or is training: what finalize runs with
    one worker, and each ``hpo retrain`` child with several."""
    for run in runs:
        folder = runs_dir / run.name
        folder.mkdir(parents=True, exist_ok=True)
        claim = FileLock(folder / CLAIM_FILE)
        try:
            claim.acquire(timeout=0)
        except Timeout:
            continue  # another retraining process has it
        try:
            if not (folder / RESULT_FILE).exists():  # finished by another process meanwhile
                # a fold's model is kept until finalize has scored its held-out posts with it
                config = train_config(spec, run.params, run.seed, folder / "model", run.cv_fold)
                record = _retrain(config, run, folder)
                if on_done:
                    on_done(record)
        finally:
            claim.release()


def child_launches(
    spec_path: str,
    overrides: Sequence[str],
    runs_dir: Path,
    n: int,
    *,
    threads: int,
    storage: StorageUrl | str,
    parent_pid: int | None = None,
    memory_mb: int | None = None,
    base_env: Mapping[str, str] | None = None,
) -> list[tuple[list[str], dict[str, str]]]:
    """Each retraining child's command and environment: ``threads`` CPU threads each and
    ``memory_mb`` of host memory, told finalize's PID so it dies with it; the storage URL in
    the environment, never in `ps`."""
    contract = ChildContract(
        threads=threads,
        memory_mb=memory_mb,
        parent_pid=os.getpid() if parent_pid is None else parent_pid,
        storage=StorageUrl.of(storage),
    )
    program = [sys.executable, "-m", "hpo", "retrain", spec_path, "--runs-dir", str(runs_dir)]
    cmd, env = [*program, *contract.flags(), *set_flags(overrides)], contract.env(base_env)
    return [(list(cmd), dict(env)) for _ in range(n)]


def _run_children(
    launches: Sequence[tuple[list[str], dict[str, str]]],
    count_finished: Callable[[], int],
    bar: tqdm,
    say: Say,
) -> list[int]:
    """Start the children and wait for all of them; their exit codes. On Ctrl-C, SIGTERM or
    SIGHUP, stop them all, then raise KeyboardInterrupt."""
    procs: list[subprocess.Popen] = []
    relays: list[threading.Thread] = []
    with interruptible():  # the stop runs inside too: a second signal cannot cut it short
        try:
            for cmd, env in launches:  # from the main thread: see exit_with_parent
                procs.append(
                    start_child(
                        cmd,
                        env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                        bufsize=1,
                    )
                )
                relays.append(_relay(procs[-1]))
            while any(proc.poll() is None for proc in procs):
                time.sleep(POLL_SECONDS)
                bar.update(count_finished() - bar.n)
        except KeyboardInterrupt:
            stop_children(procs, signal.SIGTERM, STOP_SECONDS)
            for relay in relays:
                relay.join(RELAY_DRAIN_SECONDS)  # what they said while stopping
            raise
    for relay in relays:
        relay.join(RELAY_DRAIN_SECONDS)  # their last lines (an error) before ours
    bar.update(count_finished() - bar.n)
    return [proc.returncode for proc in procs]


def retrain_child(
    spec_path: str, overrides: Sequence[str], runs_dir: str, contract: ChildContract
) -> int:
    """``hpo retrain``: one of finalize's retraining processes (see the module's docstring)."""
    contract.apply()  # first: a finalize killed while this one starts is noticed too
    # the storage comes from $HPO_STORAGE, as finalize resolved it
    spec = load_spec(spec_path, overrides)
    runs = [Run(**record) for record in json.loads((Path(runs_dir) / PLAN_FILE).read_text())]
    retrain_pending(spec, runs, Path(runs_dir))
    return 0


def _retrain(config: TrainConfig, run: Run, run_dir: Path) -> RunResult:
    from hpo.train.loop import train

    with run_log(run_dir, run.name):
        result = train(config)
    record = _record(
        run,
        value=result.value,
        best_epoch=result.best_epoch,
        metrics=rounded(result.metrics),
        wall_seconds=round(result.wall_seconds, 1),
    )
    # last: its presence means the run and its model are complete
    write_json(run_dir / RESULT_FILE, record.model_dump())
    return record


def _reused(run: Run, runs_dir: Path, say: Say) -> bool:
    """Whether ``run`` is now its trial's kept checkpoint, linked in with its result.json
    (the trial's validation figures, marked ``reused_from_trial``); False where it is not
    reused, or its checkpoint could not be (then it is retrained, and says why)."""
    if run.reuse is None or run.reuse.checkpoint is None:
        return False
    folder = runs_dir / run.name
    folder.mkdir(parents=True, exist_ok=True)
    if problem := link_checkpoint(run.reuse, folder / "model"):
        say(f"{run.name}: retrained after all: {problem}")
        return False
    record = _record(run, **run.reuse.record, reused_from_trial=run.reuse.trial)
    write_json(folder / RESULT_FILE, record.model_dump())  # last, as a retraining's
    say(f"{run.name}: trial {run.reuse.trial}'s kept checkpoint, reused: not retrained")
    return True


def _record(run: Run, **figures) -> RunResult:
    """A run's result.json: the run, and its validation ``figures`` (value, best_epoch,
    metrics, wall_seconds)."""
    return RunResult(
        run=run.name,
        rank=run.rank,
        trial=run.trial,
        seed=run.seed,
        fold=run.cv_fold,
        params=run.params,
        **figures,
    )


@contextmanager
def run_log(folder: Path, name: str) -> Iterator[Path]:
    """While one retraining runs, hpo's lines at INFO (the loop's epoch lines among them) go to
    standard error named by the run, as ``hpo tune``'s workers name theirs, above any progress
    bar; and all of them, the log-file-only detail too, to ``folder/train.log``, kept."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RUN_LOG
    to_file = logging.FileHandler(path, mode="w")  # a retraining started over, its log too
    to_file.setFormatter(logging.Formatter(RUN_LOG_FORMAT))
    to_terminal = _AboveTheBar()
    to_terminal.setFormatter(
        logging.Formatter(f"%(asctime)s [{name.replace('%', '%%')}] %(message)s")
    )
    package, detail = logging.getLogger("hpo"), logging.getLogger("hpo.detail")
    level, propagate = package.level, package.propagate
    package.setLevel(logging.INFO)
    package.propagate = False  # named once by the handler here, not again by the root's
    for logger, handler in ((package, to_terminal), (package, to_file), (detail, to_file)):
        logger.addHandler(handler)
    try:
        yield path
    finally:
        for logger, handler in ((package, to_terminal), (package, to_file), (detail, to_file)):
            logger.removeHandler(handler)
        package.setLevel(level)
        package.propagate = propagate
        to_file.close()


class _AboveTheBar(logging.Handler):
    """A log line on standard error through tqdm, which lifts a progress bar out of its way."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:
            self.handleError(record)


def _relay(proc: subprocess.Popen) -> threading.Thread:
    """A retraining child's output, line by line, on our standard error above the bar."""

    def relay() -> None:
        with contextlib.suppress(OSError, ValueError):  # our stderr gone: nothing to show it on
            for line in proc.stdout:
                tqdm.write(line.rstrip("\n"), file=sys.stderr)

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    return thread


def rounded(metrics: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in metrics.items()}
