"""How a worker died, in words, from what the launcher saw: its exit code or signal, its peak
resident memory against its ceiling, and whether the kernel's OOM killer ran meanwhile."""

from __future__ import annotations

import signal


def peak_resident_mb(pid: int) -> float | None:
    """A live process's peak resident set (VmHWM), in MiB; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(
                (int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:")), None
            )
    except (OSError, ValueError):
        return None


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has ended since boot (``oom_kill`` in
    /proc/vmstat, readable by anyone, unlike the kernel log); None where it is not there."""
    try:
        with open("/proc/vmstat") as vmstat:
            return next(
                (int(line.split()[1]) for line in vmstat if line.startswith("oom_kill ")), None
            )
    except (OSError, ValueError, IndexError):
        return None


NEAR_CEILING = 0.9  # a peak this close to the worker's memory ceiling is memory pressure


def death_words(
    returncode: int,
    peak_mb: float | None,
    ceiling_mb: float | None = None,
    oom_killer_ran: bool | None = None,
) -> str:
    """How a worker died, in words: a signal by name. A SIGKILL is called out of memory only on
    evidence: the kernel's OOM killer ran meanwhile (``oom_killer_ran``; None: unknown), or the
    worker's peak resident memory came near its ceiling; else it says what was seen instead (a
    manual `kill -9` was reported as "out of memory? … (dmesg says …)")."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    words = f"killed by signal {-returncode} ({name})"
    if -returncode != signal.SIGKILL:
        return words
    peak = f"peak RSS {peak_mb / 1024:.1f} GB" if peak_mb else "peak RSS not seen"
    if ceiling_mb:
        peak += f" of its {ceiling_mb / 1024:.1f} GB ceiling"
    near = bool(peak_mb and ceiling_mb and peak_mb >= NEAR_CEILING * ceiling_mb)
    if oom_killer_ran or near:
        seen = ["the kernel's OOM killer ran"] if oom_killer_ran else []
        return (
            f"{words} — out of memory: {', '.join([*seen, peak])}; lower the memory a trial "
            "needs or run fewer workers"
        )
    if oom_killer_ran is False:
        peak += "; the kernel's OOM killer did not run"
    return f"{words} — not by hpo, and no sign of running out of memory ({peak})"
