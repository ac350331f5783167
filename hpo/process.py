"""Process chores every long-running command shares: stopping on signals, following a
launcher out when it dies and waiting for its go, the CPU threads each training process gets,
and output that may have nowhere to go or no terminal to draw a progress bar on.
(Keeping a storage URL's secrets out of what a process prints is ``hpo.storage_url``'s.)"""

from __future__ import annotations

import _thread
import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

STOP_SIGNALS = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
)  # Ctrl-C, kill/docker stop, terminal closed
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
# where the kernel cannot signal a parent's death, how often a thread looks
PARENT_POLL_SECONDS = 1.0
GO = "go\n"  # the line `hpo tune` writes to a waiting worker's stdin once the study exists
LOST_OUTPUT = (errno.EIO, errno.EPIPE)  # the terminal was closed; whoever read our pipe went away


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside the block the first SIGINT, SIGTERM or SIGHUP raises KeyboardInterrupt, so
    the code that catches it runs its clean-up (re-queueing a running trial, stopping
    workers). Later ones are ignored until the block ends: a second Ctrl-C, or the death
    signal of a launcher that exits meanwhile, must not cut that clean-up short. Each
    clean-up is bounded (a worker's database calls time out; a launcher SIGKILLs workers
    that linger).

    Python raises the KeyboardInterrupt wherever the main thread is when it runs the
    handler, and from Python code the garbage collector runs (a weakref callback, a
    ``__del__``) it cannot propagate: Python prints it and goes on. Such a lost one is raised
    again, until it lands where it propagates, and signals count again meanwhile. A
    launcher's death signal comes once: a worker that lost it, ignoring every signal after
    it, trained on with nobody left to stop it.

    Set explicitly: a process started in the background inherits SIGINT ignored. Only
    the main thread may set handlers; elsewhere the block runs unchanged. The caller's
    handlers are back once the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    state = _Stopping()

    def stop(signum, frame):
        if state.in_hook:  # in `dropped`, or a hook it calls: raised here, it is lost too
            _raise_in_main_thread(signum)
            return
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        state.signum, state.raised = signum, KeyboardInterrupt()
        raise state.raised

    def dropped(unraisable) -> None:
        state.in_hook = True
        try:
            if state.raised is not None and unraisable.exc_value is state.raised:
                state.raised = None  # lost where it was raised: raise it again
                for sig in STOP_SIGNALS:
                    signal.signal(sig, stop)
                _raise_in_main_thread(state.signum)
            else:
                hook(unraisable)
        finally:
            state.in_hook = False

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    hook, sys.unraisablehook = sys.unraisablehook, dropped
    try:
        yield
    finally:
        if sys.unraisablehook is dropped:  # unless someone set their own meanwhile
            sys.unraisablehook = hook
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


@dataclass
class _Stopping:
    """An ``interruptible`` block's stop: which signal came, the KeyboardInterrupt it raised
    (None until one is raised, and again once it was lost), and whether the main thread is in
    the hook that is told of lost exceptions (``sys.unraisablehook``)."""

    signum: int = 0
    raised: KeyboardInterrupt | None = None
    in_hook: bool = False


def _raise_in_main_thread(signum: int) -> None:
    """Have the handler of ``signum`` run again in the main thread, from a thread of its own:
    once the main thread has left the hook it is in (a handler runs at the main thread's next
    instruction, and one that raises in the hook is lost). ``_thread``'s start does not wait
    for the thread to run, as ``threading``'s does."""
    _thread.start_new_thread(_thread.interrupt_main, (signum,))


@contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Inside the block SIGINT, SIGTERM and SIGHUP wait (recorded, not lost); one that came
    meanwhile is raised again as the block ends, so a step that must not be cut in half
    finishes first. Only the main thread may set handlers; elsewhere the block runs unchanged.

    Swaps the Python handlers rather than masking the signals: the kernel hands a process
    signal to any thread that does not block it (Optuna's heartbeat thread, the
    exit-with-parent watcher), and Python then runs the handler in the main thread anyway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, frame: pending.append(signum))
        for sig in STOP_SIGNALS
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        if pending:
            signal.raise_signal(pending[0])


def await_go() -> bool:
    """Wait for the launcher's go on stdin; False at end of file (its checks failed, or it
    stopped), when there is nothing to do and nothing was touched."""
    return sys.stdin.readline() == GO


def process_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: beyond any PID
        return False
    except PermissionError:  # it exists, and belongs to another user
        return True
    return True


def obey_sigint() -> None:
    """Let SIGINT end this process again where it started with SIGINT ignored, as a background
    job of a script does: the launcher stops its workers with SIGINT, and one that came while a
    worker still loaded its libraries was lost; the worker then ran trials until it was killed
    30 s later. Until ``interruptible`` sets its handler, SIGINT ends a child at once: it has
    touched nothing yet."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_DFL)


def exit_with_parent(pid: int) -> None:
    """Send this process SIGTERM when process ``pid``, its parent (the ``hpo tune`` that
    started it), exits: killed with -9, or gone with its closed terminal. A worker then
    stops as SIGTERM stops it, re-queueing its running trial, instead of running on
    unsupervised in its own session.

    On Linux the kernel sends it (PR_SET_PDEATHSIG; it fires when the *thread* that
    started this process ends, so the launcher starts workers from its main thread);
    elsewhere a daemon thread polls the parent's PID. The parent may have died before
    this ran: then the signal comes at once.
    """
    if not _parent_death_signal(signal.SIGTERM):
        _watch_parent(pid)
    if os.getppid() != pid:  # already orphaned (adopted by init or a subreaper)
        os.kill(os.getpid(), signal.SIGTERM)


def _parent_death_signal(sig: signal.Signals) -> bool:
    """Ask the kernel to send ``sig`` when our parent dies; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the C library this Python runs on
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl in this C library
        return False


def _watch_parent(pid: int, poll_seconds: float = PARENT_POLL_SECONDS) -> None:
    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(poll_seconds)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def start_child(cmd: Sequence[str], env: Mapping[str, str], **popen) -> subprocess.Popen:
    """Start ``cmd`` in a session of its own: a Ctrl-C in the terminal reaches only us, who
    stop it in order, and ``stop_children`` reaches whatever it started. Call from the main
    thread: the child's ``exit_with_parent`` signal fires when the *thread* that started it ends."""
    return subprocess.Popen(list(cmd), env=dict(env), start_new_session=True, **popen)


def stop_children(
    procs: Iterable[subprocess.Popen], signum: int, grace_seconds: float
) -> list[subprocess.Popen]:
    """Send ``signum`` to the process group of each child still running, then SIGKILL the
    groups of those still running ``grace_seconds`` later; returns the ones it killed."""
    procs, killed = list(procs), []
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(proc.pid, signum)
    deadline = time.monotonic() + grace_seconds
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            killed.append(proc)
    return killed


def available_cpus() -> int:
    """The CPUs this process may run on: its affinity (a Slurm task's or a container's share),
    capped by a cgroup CPU quota (a container's ``--cpus``), not every CPU of the machine."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cpus or 1, _cgroup_quota() or cpus or 1))


def _cgroup_quota(path: str = "/sys/fs/cgroup/cpu.max") -> int | None:
    """cgroup v2's CPU quota in whole CPUs (``"200000 100000"``: 2); None without one."""
    try:
        quota, period = open(path).read().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else max(1, int(quota) // int(period))


@dataclass(frozen=True)
class FreeCpus:
    """What the machine leaves this command: ``cpus`` of ``available`` that the last minute's
    load (``load``, the run queue of other work: none of ours runs yet) leaves idle."""

    cpus: int
    available: int
    load: float

    def words(self, threads: int, per: str) -> str | None:
        """The line a command says when others' work cut its threads; None when it did not."""
        if self.cpus >= self.available:
            return None
        return (
            f"{self.available - self.cpus} of {self.available} cores are busy with other work "
            f"(load {self.load:.1f}): {threads} thread{'s' if threads > 1 else ''} {per}; "
            "--threads N sets it"
        )


def free_cpus() -> FreeCpus:
    """The available CPUs less the last minute's load, at least one. Threads beyond the idle
    cores time-slice with the other work: beside two other trainings on 2 cores a retraining ran
    at 1.2 examples/s on 2 threads and 7.0 on 1 (issue #55: 3.3 against 157 at load 4-8)."""
    available, load = available_cpus(), os.getloadavg()[0]
    return FreeCpus(max(1, min(available, round(available - load + 0.25))), available, load)


def threads_per_process(processes: int, threads: int | None = None, cpus: int | None = None) -> int:
    """The torch CPU threads each of ``processes`` training processes gets: ``threads`` where the
    user set them (``--threads``), else ``cpus`` (default: what ``free_cpus`` leaves) split
    evenly, never below one, so N processes never oversubscribe the cores. One rule for ``hpo
    tune``'s workers, finalize's retrainings, ``hpo predict`` and ``hpo validate --estimate``'s
    timing: the same configuration trained at 8 examples/s in a finalize left at torch's default
    beside other work, and at 106 in a tune worker at 1 thread."""
    return threads or max(1, (cpus or free_cpus().cpus) // processes)


def shows_progress(asked: bool | None) -> bool:
    """Whether a command draws its progress bar: as asked (``--progress``, ``--no-progress``),
    else only where standard error, which the bar is drawn on, is a terminal. Redrawn into a
    file or a pipe (a Slurm or CI log, ``make demo > log 2>&1``), a bar is a stream of carriage
    returns with the log lines glued to its fragments."""
    if asked is not None:
        return asked
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # no standard error, or a closed one
        return False


@contextmanager
def output_may_be_gone() -> Iterator[None]:
    """A write inside the block that fails because the terminal was closed (EIO) or the
    reader of our pipe went away (EPIPE) is dropped, and stdout and stderr then go to
    /dev/null, so later writes and the flush at exit succeed too. A launcher whose
    terminal window closed must still stop its workers; what it prints is a courtesy.
    """
    try:
        yield
    except OSError as exc:
        if exc.errno not in LOST_OUTPUT:
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
