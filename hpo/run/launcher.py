"""Start N worker processes on one study and supervise them.

``worker_launches`` computes each worker's command and environment as a pure function
(tested without spawning); ``Supervisor`` runs them, relays their log lines above a
progress bar, reports (and optionally replaces) workers that die, and on Ctrl-C stops
them so their running trials are re-queued rather than left RUNNING.

Workers are started before the launcher's checks and wait for a ``go`` line on stdin:
their imports (torch, transformers: seconds) overlap the checks instead of following
them, and a check that fails ends them (``abandon``) before they have touched anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tqdm import tqdm

from hpo.errors import find_cause
from hpo.process import GO, interruptible, output_may_be_gone, start_child, stop_children
from hpo.run.breaker import CircuitBreaker
from hpo.run.death import death_words, oom_kills, peak_resident_mb
from hpo.spec import argv_overrides
from hpo.storage_url import ENV as STORAGE_ENV
from hpo.storage_url import StorageUrl
from hpo.study import (
    caused_by_database,
    database_problem,
    fail_trials_of_worker,
    recent_outcomes,
    state_counts,
    study_exists,
)

WORKER_STOP_SECONDS = 30  # after Ctrl-C, how long workers get to re-queue their trials
RELAY_DRAIN_SECONDS = 5  # after a worker exits, how long its last lines (a traceback) get to arrive


@dataclass(frozen=True)
class WorkerLaunch:
    name: str
    cmd: list[str]
    env: dict[str, str]
    memory_mb: int | None = None  # its host-memory ceiling, to judge how it died


def worker_launches(
    spec_path: str,
    n_workers: int,
    *,
    storage: StorageUrl | str,
    overrides: Sequence[str] = (),
    cpu_count: int,
    gpu_ids: Sequence[str] = (),
    gpus_per_trial: int = 1,
    threads: int | None = None,
    base_env: Mapping[str, str] | None = None,
    host: str | None = None,
    parent_pid: int | None = None,
    memory_mb: int | None = None,
) -> list[WorkerLaunch]:
    """Each worker's command and environment.

    GPUs round-robin (one per worker via CUDA_VISIBLE_DEVICES); CPU threads split evenly
    so N workers never oversubscribe the cores, unless ``threads`` sets each worker's
    count. Every worker waits for ``GO`` on stdin (``Supervisor.run`` sends it). The
    storage URL travels in the environment, not the command line (a ``storage=`` override
    is left out of it), so a password never shows in `ps`. Each worker
    is told the launcher's PID (``parent_pid``, default this process) so it stops when
    the launcher dies. ``memory_mb`` is each worker's host-memory ceiling: crossing it fails
    a step as out-of-memory, before the kernel's OOM killer ends the worker.
    """
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    threads = threads or max(1, cpu_count // n_workers)
    # Disjoint groups of gpus_per_trial GPUs, handed out round-robin (a group per worker).
    groups = [
        [str(g) for g in gpu_ids[i : i + gpus_per_trial]]
        for i in range(0, len(gpu_ids) - gpus_per_trial + 1, gpus_per_trial)
    ]
    host = host or socket.gethostname()
    parent_pid = os.getpid() if parent_pid is None else parent_pid
    launches = []
    for index in range(n_workers):
        name = f"{host}/{index}"
        env = dict(base_env if base_env is not None else os.environ)
        env.update(
            {
                STORAGE_ENV: StorageUrl.of(storage).text,
                "OMP_NUM_THREADS": str(threads),
                "MKL_NUM_THREADS": str(threads),
                "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if groups:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(groups[index % len(groups)])
        cmd = [
            sys.executable,
            "-m",
            "hpo",
            "worker",
            spec_path,
            "--name",
            name,
            "--threads",
            str(threads),
            "--parent-pid",
            str(parent_pid),
            "--await-go",
        ]
        if memory_mb is not None:
            cmd += ["--memory-limit", str(memory_mb)]
        for override in argv_overrides(overrides):  # the storage is in the environment
            cmd += ["--set", override]
        launches.append(WorkerLaunch(name, cmd, env, memory_mb))
    return launches


def visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES if set, else every device torch sees."""
    if (listed := os.environ.get("CUDA_VISIBLE_DEVICES")) is not None:
        return [g.strip() for g in listed.split(",") if g.strip() and g.strip() != "-1"]
    if sys.platform == "linux" and not any(os.path.exists(node) for node in _GPU_DEVICE_NODES):
        # no GPU driver's device node: skips importing torch (seconds) before the workers start
        return []
    import torch

    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


_GPU_DEVICE_NODES = (
    "/dev/nvidiactl",
    "/dev/kfd",
    "/dev/dxg",
)  # NVIDIA, ROCm, WSL: what CUDA/HIP devices need


def available_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


USAGE_EXIT = 2  # a worker refused its spec or found its study deleted: a replacement cannot help


class Supervisor:
    def __init__(
        self,
        launches: Sequence[WorkerLaunch],
        progress=None,
        restart_dead: bool = False,
        poll_seconds: float = 2.0,
        breaker: CircuitBreaker | None = None,
        stop_seconds: float = WORKER_STOP_SECONDS,
    ):
        self.launches, self.progress = list(launches), progress
        self.stop_seconds = stop_seconds  # after a stop signal, how long before SIGKILL
        self.restart_dead, self.poll_seconds = restart_dead, poll_seconds
        self.breaker = breaker or CircuitBreaker()
        self.procs: dict[str, subprocess.Popen] = {}
        self.relays: dict[str, threading.Thread] = {}
        self.deaths = 0
        self.stopped_because: str | None = None  # set when the circuit breaker stopped the study
        self.resumable = True  # False once the study itself is gone: nothing to resume
        self._failed_seen = 0
        self.peaks: dict[str, float] = {}  # worker -> peak resident MiB, as last seen alive
        self._oom_kills = oom_kills()  # the kernel's count, to tell whether it killed a worker
        # a worker closed its output: look at once, not at the next poll
        self._exited = threading.Event()

    def start(self) -> None:
        """Start every worker; each loads its libraries, then waits for ``run`` to say go."""
        for launch in self.launches:
            if launch.name not in self.procs:
                self._spawn(launch)

    def abandon(self) -> None:
        """The study will not run (a check failed, Ctrl-C): end the workers, which have
        touched nothing yet. SIGTERM ends them at once: before go they handle no signal."""
        stop_children(self.procs.values(), signal.SIGTERM, self.stop_seconds)
        self.procs.clear()

    def run(self, progress=None) -> int:
        """Start the workers (unless ``start`` did), let them go, and supervise them until
        they end: 0 when every worker ended cleanly, 1 when some died or the study could
        only fail (``stopped_because`` says why), 130 on Ctrl-C, SIGTERM or SIGHUP."""
        self.progress = progress or self.progress
        with interruptible():  # the stop runs inside too: a second signal cannot cut it short
            try:
                # under interruptible(): a Ctrl-C now still stops those already started
                self.start()
                for launch in self.launches:
                    self._release(launch)
                return self._supervise()
            except KeyboardInterrupt:
                self.progress.write("stopping workers; their running trials are re-queued …")
                self.stop()
                return 130

    def _supervise(self) -> int:
        try:
            return self._follow()
        except StudyDeleted as gone:  # its workers stop on their own (exit 2); the rest are told
            self.stopped_because, self.resumable = str(gone), False
            self.progress.write(f"stopping: {gone}")
            self.stop()
            return 1

    def _follow(self) -> int:
        while self.procs:
            self._exited.wait(self.poll_seconds)
            self._exited.clear()
            self.progress.refresh()
            for launch in self.launches:
                proc = self.procs.get(launch.name)
                if proc is None:
                    continue
                if proc.poll() is None:
                    self.peaks[launch.name] = peak_resident_mb(proc.pid) or self.peaks.get(
                        launch.name, 0.0
                    )
                    continue
                del self.procs[launch.name]
                # its last lines before our notice
                self.relays.pop(launch.name).join(RELAY_DRAIN_SECONDS)
                if proc.returncode != 0:
                    self.deaths += 1
                    replace = self.restart_dead and proc.returncode != USAGE_EXIT
                    how = self._death_words(launch, proc.returncode)
                    self.progress.write(
                        f"worker {launch.name} died ({how})"
                        + ("; starting a replacement" if replace else "")
                    )
                    self.progress.worker_died(launch.name, how)  # its trial must not stay RUNNING
                    self.stopped_because = self.stopped_because or self.breaker.worker_exited(
                        proc.returncode, self.progress.finished()
                    )
                    if replace and not self.stopped_because and not self.progress.done():
                        self._spawn(launch)
                        self._release(launch)
            self.stopped_because = self.stopped_because or self._failing_trials()
            if self.stopped_because:
                self.progress.write(f"stopping the study: {self.stopped_because}")
                self.stop()
                return 1
        self.progress.refresh()
        return 1 if self.deaths and not self.progress.done() else 0

    def _death_words(self, launch: WorkerLaunch, returncode: int) -> str:
        seen, self._oom_kills = self._oom_kills, oom_kills()
        ran = None if seen is None or self._oom_kills is None else self._oom_kills > seen
        return death_words(returncode, self.peaks.pop(launch.name, None), launch.memory_mb, ran)

    def _failing_trials(self) -> str | None:
        """Look at the latest trials only when another one has failed since the last look."""
        failed = self.progress.failed()
        if failed == self._failed_seen:
            return None
        self._failed_seen = failed
        return self.breaker.check_trials(self.progress.recent_outcomes(self.breaker.failed_trials))

    def _spawn(self, launch: WorkerLaunch) -> None:
        # From the main thread: a worker's death signal fires when the thread that started it ends.
        self.procs[launch.name] = start_child(
            launch.cmd,
            launch.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )

    def _release(self, launch: WorkerLaunch) -> None:
        """Say go to a waiting worker and relay its output (held in its pipe until now)."""
        proc = self.procs[launch.name]
        with contextlib.suppress(OSError):  # it died while loading: the supervision reports it
            proc.stdin.write(GO)
            proc.stdin.close()
        relay = threading.Thread(target=self._relay, args=(proc,), daemon=True)
        relay.start()
        self.relays[launch.name] = relay

    def _relay(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.progress.write(line.rstrip())
        self._exited.set()

    def stop(self) -> None:
        """SIGINT every worker (each re-queues its trial), then SIGKILL whoever lingers and
        fail its trials: the worker that would have re-queued them is gone, and once the
        launcher exits no heartbeat sweep may ever run."""
        killed = stop_children(self.procs.values(), signal.SIGINT, self.stop_seconds)
        for relay in self.relays.values():
            relay.join(RELAY_DRAIN_SECONDS)  # what workers said while stopping
        for name, proc in self.procs.items():
            if proc in killed:
                how = f"killed: it had not stopped {self.stop_seconds:g} s after being asked"
                self.progress.write(f"worker {name} {how}")
                self.progress.worker_died(name, how)


class StudyDeleted(Exception):
    """The study was deleted from its storage under a running tune: nothing left to run."""


class StudyProgress:
    """A tqdm bar of finished/total trials with running/pruned/failed counts and the best value.

    While the database is unreachable (a restart, a network cut) the bar keeps the last
    counts it read and says so once; the workers retry on their own, and give up (and
    die, which the supervisor reports) if the outage lasts too long.
    """

    def __init__(self, study, n_trials: int, enabled: bool = True, max_retry: int = 0):
        self.study, self.n_trials, self.max_retry = study, n_trials, max_retry
        self.bar = tqdm(total=n_trials, unit="trial", disable=not enabled, dynamic_ncols=True)
        self._lock = threading.Lock()
        self._counts = {"finished": 0, "running": 0, "pruned": 0, "failed": 0, "best": None}
        self._outage: str | None = None  # the kind of database problem being waited out

    def done(self) -> bool:
        return self._poll()["finished"] >= self.n_trials

    def finished(self) -> int:
        return self._counts["finished"]

    def failed(self) -> int:
        return self._counts["failed"]

    def recent_outcomes(self, k: int) -> list[tuple[str, str | None]]:
        """The last ``k`` trials to end, oldest first; none while the database is unreachable."""
        try:
            return recent_outcomes(self.study, k)
        except Exception as exc:
            self._ride_out(exc)
            return []

    def worker_died(self, worker: str, how: str) -> None:
        """Fail the dead worker's RUNNING trials at once, saying how it died, and queue their
        retries; without this they would wait for a heartbeat sweep that, once the launcher
        exits, nobody runs. While the database is unreachable the heartbeat does it later."""
        try:
            for number in fail_trials_of_worker(
                self.study, worker, f"worker {worker} {how}", self.max_retry
            ):
                self.write(f"trial {number} failed with its worker and was re-queued")
        except Exception as exc:
            self._ride_out(exc)

    def refresh(self) -> None:
        counts = self._poll()
        best = "-" if counts["best"] is None else f"{counts['best']:.4f}"
        with self._lock:
            self.bar.n = min(counts["finished"], self.n_trials)
            with output_may_be_gone():  # the terminal was closed: the supervision goes on
                self.bar.set_postfix_str(
                    f"running={counts['running']} pruned={counts['pruned']} "
                    f"failed={counts['failed']} best={best}"
                )

    def _poll(self) -> dict:
        """The study's counts now, or the last ones read while the database is unreachable."""
        try:
            self._counts = state_counts(self.study)
        except Exception as exc:
            self._ride_out(exc)
            return self._counts
        if self._outage:
            self._outage = None
            self.write("database reachable again")
        return self._counts

    def _ride_out(self, exc: Exception) -> None:
        """Return when ``exc`` is a database error the workers ride out too (any of them: a
        restart, a revoked privilege, a dropped table), saying once per outage what is wrong;
        raise ``StudyDeleted`` when the study was deleted under us, and anything else as is."""
        if find_cause(exc, lambda seen: isinstance(seen, KeyError)) and not study_exists(
            self.study
        ):
            raise StudyDeleted(
                f"study {self.study.study_name!r} was deleted from its storage while it ran"
            ) from None
        if not caused_by_database(exc):
            raise exc
        problem = database_problem(self.study, exc)
        if problem.kind != self._outage:  # a new outage, or a different one
            self._outage = problem.kind
            self.write(f"{problem}; waiting for it, the workers retry on their own")

    def write(self, line: str) -> None:
        with self._lock, output_may_be_gone():
            self.bar.write(line)

    def close(self) -> None:
        with output_may_be_gone():
            self.bar.close()
