"""A worker's host-memory ceiling, seen from inside the process.

Without one, a step that grows the process past what the machine has is ended by the
kernel's out-of-memory killer: the worker dies by SIGKILL and its trial is left RUNNING.
With one, crossing it inside a guarded block raises ``HostMemoryExceeded``, an
out-of-memory error the training loop already handles (free, halve the micro-batch, retry;
fail the trial with its reason when even one sequence does not fit).

A watcher thread samples the resident set every ``SAMPLE_SECONDS`` and, inside a guarded
block, interrupts the main thread, which raises at its next Python instruction (after the
torch operation it is in, which a bounded micro-batch keeps small). The resident set counts
the freed heap glibc keeps for reuse, so it is handed back first (``over_ceiling``): only
live memory past the ceiling ends a step. Linux only: elsewhere ``resident_mb`` is None and
nothing is watched.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import ctypes.util
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SAMPLE_SECONDS = 0.05  # a 4 KiB read of /proc per sample: ~20 µs
_INTERRUPT = signal.SIGUSR2  # simulated by _thread.interrupt_main: no real signal is sent
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20 if hasattr(os, "sysconf") else 0.0


# of the machine's memory, split between workers; the rest for the launcher and the system
MEMORY_SHARE = 0.9


def memory_share_mb(n_workers: int, total_mb: float | None = None) -> int | None:
    """Each of ``n_workers`` workers' host-memory ceiling: an even split of what this machine
    (or the cgroup it runs in: a container, a Slurm job) may use. None where it is unknown."""
    total_mb = machine_memory_mb() if total_mb is None else total_mb
    return None if total_mb is None else max(1, int(total_mb * MEMORY_SHARE / n_workers))


def machine_memory_mb() -> float | None:
    """The memory this process may use: the machine's, or its cgroup's limit when lower."""
    limits = []
    try:
        with open("/proc/meminfo") as meminfo:
            limits.append(
                int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1])
                / 1024
            )
    except (OSError, StopIteration, ValueError):
        return None
    for path in (
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ):  # cgroup v2, v1
        with contextlib.suppress(OSError, ValueError), open(path) as limit:
            limits.append(int(limit.read().strip()) / 2**20)  # "max" (no limit) is a ValueError
    return min(limits)


class HostMemoryExceeded(RuntimeError):
    """The process crossed its host-memory ceiling; "out of memory" in the text on purpose:
    every handler of allocation failures treats it as one."""


def resident_mb() -> float | None:
    """This process's resident set now, in MiB; None where /proc is not there."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_MB
    except (OSError, IndexError, ValueError):
        return None


def release_free_memory() -> None:
    """Hand freed heap pages back to the system (glibc keeps them otherwise), so the resident
    set falls once a failed step's tensors are gone. A no-op without glibc."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def _libc_function(name: str):
    library = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(library), name) if library else None
    except (OSError, AttributeError):
        return None


_malloc_trim = _libc_function("malloc_trim")
_mallopt = _libc_function("mallopt")
M_ARENA_MAX = -8  # from <malloc.h>


def limit_malloc_arenas() -> None:
    """At most two glibc arenas: per-thread arenas each keep their own free memory. glibc's
    thresholds are otherwise left alone: a fixed 1 MiB mmap threshold (hpo's until f9aac69)
    mapped every activation afresh and faulted its pages in again each step; without it a CPU
    trial of the real job's shape takes 0.795x the time, for a higher peak resident set
    (bench/results/malloc_thresholds.json). The ceiling trims the heap when it is reached
    instead (``over_ceiling``). A no-op without glibc."""
    if _mallopt is not None:
        _mallopt(M_ARENA_MAX, 2)


def over_ceiling() -> float | None:
    """The resident set in MiB where it is past the ceiling even after the freed heap is
    handed back (glibc keeps freed pages for reuse, and they count as resident); None below
    it, or with no ceiling."""
    ceiling = _watcher.ceiling_mb
    resident = resident_mb()
    if ceiling is None or resident is None or resident <= ceiling:
        return None
    release_free_memory()
    resident = resident_mb()
    return resident if resident is not None and resident > ceiling else None


class _Watcher:
    def __init__(self):
        self.ceiling_mb: float | None = None
        self.armed = 0  # nesting depth of guarded blocks in the main thread
        self.tripped_at: float | None = None
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def set(self, ceiling_mb: float | None) -> None:
        self.ceiling_mb = ceiling_mb
        if ceiling_mb is not None and self._thread is None and resident_mb() is not None:
            self._thread = threading.Thread(
                target=self._watch, name="hpo-memory-ceiling", daemon=True
            )
            self._thread.start()

    def _watch(self) -> None:
        while True:
            self._wake.wait(SAMPLE_SECONDS)
            if not self.armed or self.ceiling_mb is None or self.tripped_at is not None:
                continue
            if (resident := over_ceiling()) is not None:
                self.tripped_at = resident
                _thread.interrupt_main(_INTERRUPT)


_watcher = _Watcher()


def set_memory_ceiling(ceiling_mb: float | None) -> None:
    """This process's ceiling in MiB (None: none). Set once per worker, before training."""
    if ceiling_mb is not None and ceiling_mb <= 0:
        raise ValueError(f"a memory ceiling must be positive; got {ceiling_mb} MiB")
    if ceiling_mb is not None:
        limit_malloc_arenas()
    _watcher.set(ceiling_mb)


def memory_ceiling_mb() -> float | None:
    return _watcher.ceiling_mb


def exceeded(resident: float) -> HostMemoryExceeded:
    return HostMemoryExceeded(
        f"out of memory: the process holds {resident:,.0f} MiB, "
        "past this worker's host-memory ceiling of "
        f"{_watcher.ceiling_mb:,.0f} MiB"
    )


@contextmanager
def guard_host_memory() -> Iterator[None]:
    """Inside, crossing the ceiling raises ``HostMemoryExceeded`` (main thread, with a
    ceiling set); elsewhere the block runs unwatched. Checked once more on the way out, so a
    crossing inside a long native call (a backward pass) is never missed."""
    if _watcher.ceiling_mb is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum, frame):
        raise exceeded(_watcher.tripped_at or resident_mb() or 0.0)

    previous = signal.signal(_INTERRUPT, interrupted) if not _watcher.armed else None
    _watcher.armed += 1
    try:
        yield
        if (resident := over_ceiling()) is not None:
            raise exceeded(resident)
    finally:
        _watcher.armed -= 1
        if not _watcher.armed:
            _watcher.tripped_at = None
            signal.signal(_INTERRUPT, previous if previous is not None else signal.SIG_DFL)
