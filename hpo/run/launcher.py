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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from hpo.process import GO, interruptible, start_child, stop_children, threads_per_process
from hpo.run.breaker import CircuitBreaker
from hpo.run.death import death_words, oom_kills, peak_resident_mb
from hpo.run.watcher import StudyDeleted
from hpo.spec import set_flags
from hpo.storage_url import StorageUrl
from hpo.train.child import ChildContract

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
    count (``threads_per_process``). Every worker waits for ``GO`` on stdin
    (``Supervisor.run`` sends it). The storage URL travels in the environment, not the
    command line (a ``storage=`` override is left out of it), so a password never shows in
    `ps`. Each worker is told the launcher's PID (``parent_pid``, default this process) so
    it stops when the launcher dies. ``memory_mb`` is each worker's host-memory ceiling:
    crossing it fails a step as out-of-memory, before the kernel's OOM killer ends the worker.
    """
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    threads = threads_per_process(n_workers, threads, cpu_count)
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
        contract = ChildContract(
            threads=threads,
            memory_mb=memory_mb,
            gpus=tuple(groups[index % len(groups)]) if groups else (),
            parent_pid=parent_pid,
            storage=StorageUrl.of(storage),
        )
        program = [sys.executable, "-m", "hpo", "worker", spec_path, "--name", name, "--await-go"]
        cmd = [*program, *contract.flags(), *set_flags(overrides)]
        launches.append(WorkerLaunch(name, cmd, contract.env(base_env), memory_mb))
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


USAGE_EXIT = 2  # a worker refused its spec or found its study deleted: a replacement cannot help


class Supervisor:
    def __init__(
        self,
        launches: Sequence[WorkerLaunch],
        view=None,
        restart_dead: bool = False,
        poll_seconds: float = 2.0,
        breaker: CircuitBreaker | None = None,
        stop_seconds: float = WORKER_STOP_SECONDS,
        watcher=None,
    ):
        # the view shows (refresh, write); the watcher reads and changes the study
        self.launches, self.view, self.watcher = list(launches), view, watcher
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

    def run(self, view=None, released: Callable[[], None] | None = None, watcher=None) -> int:
        """Start the workers (unless ``start`` did), let them go, and supervise them until
        they end: 0 when every worker ended cleanly, 1 when some died or the study could
        only fail (``stopped_because`` says why), 130 on Ctrl-C, SIGTERM or SIGHUP.
        ``released`` runs once every worker has gone: work no trial waits for."""
        self.view, self.watcher = view or self.view, watcher or self.watcher
        with interruptible():  # the stop runs inside too: a second signal cannot cut it short
            try:
                # under interruptible(): a Ctrl-C now still stops those already started
                self.start()
                for launch in self.launches:
                    self._release(launch)
                if released is not None:
                    released()
                return self._supervise()
            except KeyboardInterrupt:
                self.view.write("stopping workers; their running trials are re-queued …")
                self.stop()
                return 130

    def _supervise(self) -> int:
        try:
            return self._follow()
        except StudyDeleted as gone:  # its workers stop on their own (exit 2); the rest are told
            self.stopped_because, self.resumable = str(gone), False
            self.view.write(f"stopping: {gone}")
            self.stop()
            return 1

    def _follow(self) -> int:
        while self.procs:
            self._exited.wait(self.poll_seconds)
            self._exited.clear()
            self.view.refresh(self.watcher.poll())
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
                    self.view.write(
                        f"worker {launch.name} died ({how})"
                        + ("; starting a replacement" if replace else "")
                    )
                    self.watcher.worker_died(launch.name, how)  # its trial must not stay RUNNING
                    self.stopped_because = self.stopped_because or self.breaker.worker_exited(
                        proc.returncode, self.watcher.finished()
                    )
                    if replace and not self.stopped_because and not self.watcher.done():
                        self._spawn(launch)
                        self._release(launch)
            self.stopped_because = self.stopped_because or self._failing_trials()
            if self.stopped_because:
                self.view.write(f"stopping the study: {self.stopped_because}")
                self.stop()
                return 1
        self.view.refresh(self.watcher.poll())
        return 1 if self.deaths and not self.watcher.done() else 0

    def _death_words(self, launch: WorkerLaunch, returncode: int) -> str:
        seen, self._oom_kills = self._oom_kills, oom_kills()
        ran = None if seen is None or self._oom_kills is None else self._oom_kills > seen
        return death_words(returncode, self.peaks.pop(launch.name, None), launch.memory_mb, ran)

    def _failing_trials(self) -> str | None:
        """Look at the latest trials only when another one has failed since the last look."""
        failed = self.watcher.failed()
        if failed == self._failed_seen:
            return None
        self._failed_seen = failed
        return self.breaker.check_trials(self.watcher.recent_outcomes(self.breaker.failed_trials))

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
            self.view.write(line.rstrip())
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
                self.view.write(f"worker {name} {how}")
                self.watcher.worker_died(name, how)
        with contextlib.suppress(StudyDeleted):  # the bar's last word: nothing left running
            self.view.refresh(self.watcher.poll())
