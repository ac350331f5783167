"""The launcher's Supervisor with real processes: output relayed, Ctrl-C and SIGTERM, deaths
named in words, replacements, and the circuit breaker that stops a study."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from hpo.run.launcher import Supervisor, WorkerLaunch, worker_launches
from hpo.train.memory import machine_memory_mb, memory_share_mb


class FakeProgress:
    """Our own view (refresh / write) and study watcher (poll / done / failed / …) interfaces
    in one, recording what it is told."""

    def __init__(self, done=lambda: False):
        self.lines: list[str] = []
        self.refreshes = 0
        self._done = done
        self._lock = threading.Lock()
        self.outcomes: list[tuple[str, str | None]] = []  # trials that ended, oldest first
        self.deaths: list[tuple[str, str]] = []  # (worker, how it died)

    def poll(self) -> dict:
        return {}

    def refresh(self, counts: dict) -> None:
        self.refreshes += 1

    def write(self, line: str) -> None:
        with self._lock:
            self.lines.append(line)

    def done(self) -> bool:
        return self._done()

    def finished(self) -> int:
        return 0

    def failed(self) -> int:
        return len(self.outcomes)

    def recent_outcomes(self, k: int) -> list[tuple[str, str | None]]:
        return self.outcomes[-k:]

    def worker_died(self, worker: str, how: str) -> None:
        self.deaths.append((worker, how))


def interrupt_when(ready, signum=signal.SIGINT) -> None:
    """Send this process ``signum`` (as Ctrl-C would) once ``ready()``, from a thread."""

    def wait_then_interrupt():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if ready():
                os.kill(os.getpid(), signum)
                return
            time.sleep(0.02)

    threading.Thread(target=wait_then_interrupt, daemon=True).start()


def script(name: str, code: str) -> WorkerLaunch:
    return WorkerLaunch(name, [sys.executable, "-c", code], dict(os.environ, PYTHONUNBUFFERED="1"))


def test_worker_output_is_relayed_and_clean_exits_return_zero():
    workers = [script(f"w{i}", f"print('hello from {i}'); print('bye from {i}')") for i in range(2)]
    progress = FakeProgress()
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert Supervisor(workers, progress, watcher=progress, poll_seconds=0.1).run() == 0
    assert (
        signal.getsignal(signal.SIGINT),
        signal.getsignal(signal.SIGTERM),
    ) == handlers  # the caller's again
    for i in range(2):
        assert progress.lines.index(f"hello from {i}") < progress.lines.index(f"bye from {i}")
    assert not any("died" in line for line in progress.lines)
    assert progress.refreshes >= 1


AWAITS_GO = (
    "import sys; line = sys.stdin.readline(); print('read', repr(line)); "
    "sys.exit(0 if line == 'go\\n' else 7)"
)


def test_started_workers_wait_and_run_says_go():
    workers = [script(f"w{i}", AWAITS_GO) for i in range(2)]
    supervisor = Supervisor(workers, poll_seconds=0.1)
    supervisor.start()
    time.sleep(0.5)
    assert all(proc.poll() is None for proc in supervisor.procs.values()), "they wait for go"
    progress = FakeProgress()
    assert supervisor.run(progress, watcher=progress) == 0
    assert progress.lines.count("read 'go\\n'") == 2


def test_abandoned_workers_end_at_once_without_reading_go():
    sleepy = "import sys, time; time.sleep(60) if not sys.stdin.readline() else None; sys.exit(7)"
    supervisor = Supervisor([script("a", sleepy), script("b", AWAITS_GO)], poll_seconds=0.1)
    supervisor.start()
    procs = list(supervisor.procs.values())
    started = time.monotonic()
    supervisor.abandon()
    assert time.monotonic() - started < 10, "a worker still loading is ended, not waited for"
    assert all(proc.returncode is not None and proc.returncode != 0 for proc in procs)
    assert not supervisor.procs


def test_a_dead_worker_is_reported_and_run_returns_one():
    workers = [
        script("ok", "print('fine')"),
        script("bad", "import sys; print('about to fail'); sys.exit(3)"),
    ]
    progress = FakeProgress()
    assert Supervisor(workers, progress, watcher=progress, poll_seconds=0.1).run() == 1
    assert "worker bad died (exit code 3)" in progress.lines
    assert "fine" in progress.lines
    assert not any("worker ok died" in line for line in progress.lines)


def test_a_worker_killed_by_sigkill_is_named_in_words_with_its_peak_memory():
    """A SIGKILL is named with the peak memory the launcher saw. Out of memory is said only on
    evidence (issue #34 item 12: a manual kill -9 was reported as "out of memory? … dmesg
    says"): here the peak came near the worker's ceiling."""
    hog = (
        "import os, signal, time\nblock = bytearray(300 * 2**20)\n"
        "for i in range(0, len(block), 4096): block[i] = 1\n"
        "time.sleep(1.0)\nos.kill(os.getpid(), signal.SIGKILL)"
    )
    progress = FakeProgress()
    near = dataclasses.replace(script("hog", hog), memory_mb=330)
    assert Supervisor([near], progress, watcher=progress, poll_seconds=0.05).run() == 1
    line = next(line for line in progress.lines if line.startswith("worker hog died"))
    assert "killed by signal 9 (SIGKILL) — out of memory: " in line, line
    assert "peak RSS 0.3 GB of its 0.3 GB ceiling; lower the memory a trial needs" in line, line
    assert progress.deaths == [("hog", line.removeprefix("worker hog died (").removesuffix(")"))]


def test_a_manual_kill_9_is_not_called_out_of_memory():
    """kill -9 of a worker far under its ceiling, the kernel's OOM killer idle: say what is
    known (the signal, not from hpo, the peak against the ceiling), not "out of memory?"."""
    from hpo.run.death import oom_kills

    progress = FakeProgress()
    code = "import os, signal, time\ntime.sleep(0.5)\nos.kill(os.getpid(), signal.SIGKILL)"
    killed = dataclasses.replace(script("w", code), memory_mb=8000)
    before = oom_kills()
    assert Supervisor([killed], progress, watcher=progress, poll_seconds=0.05).run() == 1
    line = next(line for line in progress.lines if line.startswith("worker w died"))
    assert "out of memory?" not in line and "out of memory:" not in line, line
    assert "killed by signal 9 (SIGKILL) — not by hpo, and no sign of running out of memory" in line
    assert "of its 7.8 GB ceiling" in line, line
    if before is not None and oom_kills() == before:  # /proc/vmstat says no OOM kill
        assert line.endswith("; the kernel's OOM killer did not run))"), line


def test_memory_is_split_between_workers_and_reaches_their_command():
    assert memory_share_mb(4, total_mb=20_000) == 4_500
    launches = worker_launches(
        "s.yaml", 2, storage="sqlite:///x.db", cpu_count=2, base_env={}, memory_mb=4500
    )
    assert all(launch.cmd[launch.cmd.index("--memory-limit") + 1] == "4500" for launch in launches)
    assert (
        "--memory-limit"
        not in worker_launches("s.yaml", 1, storage="sqlite:///x.db", cpu_count=2, base_env={})[
            0
        ].cmd
    )
    assert (
        0
        < machine_memory_mb()
        <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20 + 1
    )


class SlowProgress(FakeProgress):
    """Writing a line above a progress bar takes time (tqdm redraws the bar)."""

    def write(self, line: str) -> None:
        time.sleep(0.001)
        super().write(line)


def test_a_dying_workers_last_lines_come_before_its_death_notice():
    """The lines a worker prints as it dies (its traceback) explain the death: none may be
    lost or come after the notice, even when the relay lags behind the worker."""
    code = "import sys\nfor i in range(300): print(f'line {i}')\nsys.exit(3)"
    progress = SlowProgress()
    assert (
        Supervisor([script("bad", code)], progress, watcher=progress, poll_seconds=0.01).run() == 1
    )
    assert progress.lines == [f"line {i}" for i in range(300)] + ["worker bad died (exit code 3)"]


def test_restart_dead_replaces_a_worker_that_died(tmp_path: Path):
    marker, finished = tmp_path / "failed-once", tmp_path / "finished"
    code = (
        "import pathlib, sys\n"
        f"marker, finished = pathlib.Path({str(marker)!r}), pathlib.Path({str(finished)!r})\n"
        "if not marker.exists():\n"
        "    marker.touch(); print('first run fails'); sys.exit(3)\n"
        "print('second run succeeds'); finished.touch()\n"
    )
    progress = FakeProgress(done=finished.exists)  # the study is done once the replacement finished
    assert (
        Supervisor(
            [script("flaky", code)], progress, watcher=progress, restart_dead=True, poll_seconds=0.1
        ).run()
        == 0
    )
    assert "worker flaky died (exit code 3); starting a replacement" in progress.lines
    assert progress.lines.index("first run fails") < progress.lines.index("second run succeeds")
    assert finished.exists()


def test_without_restart_dead_a_dead_worker_stays_dead(tmp_path: Path):
    marker = tmp_path / "runs"
    code = (
        f"import pathlib, sys; p = pathlib.Path({str(marker)!r}); "
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x'); sys.exit(3)"
    )
    progress = FakeProgress()
    assert (
        Supervisor([script("bad", code)], progress, watcher=progress, poll_seconds=0.1).run() == 1
    )
    assert marker.read_text() == "x"  # started once, never again


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_stops_every_worker_with_sigint_and_returns_130(tmp_path: Path, signum):
    """Workers run in their own session; the supervisor forwards SIGINT so each can re-queue its
    trial."""
    code = (
        "import pathlib, signal, sys, time\n"
        "def stop(*_):\n"
        f"    pathlib.Path({str(tmp_path)!r}, sys.argv[1]).touch(); "
        "print('requeued', sys.argv[1]); sys.exit(0)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    workers = [
        WorkerLaunch(name, [sys.executable, "-c", code, name], dict(os.environ))
        for name in ("a", "b")
    ]
    progress = FakeProgress()
    supervisor = Supervisor(workers, progress, watcher=progress, poll_seconds=0.1)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    # Ctrl-C only while run() supervises both workers
    interrupt_when(
        lambda: progress.lines.count("ready") == 2 and len(supervisor.procs) == 2, signum
    )
    started = time.monotonic()
    assert supervisor.run() == 130
    assert time.monotonic() - started < 20
    assert (tmp_path / "a").exists() and (tmp_path / "b").exists()
    assert all(proc.returncode == 0 for proc in supervisor.procs.values())
    assert any("stopping workers" in line for line in progress.lines)
    # relayed before run() returns
    assert "requeued a" in progress.lines and "requeued b" in progress.lines
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


def test_a_worker_that_does_not_stop_is_killed_and_its_trials_failed_for_it():
    """A worker still running stop_seconds after Ctrl-C is SIGKILLed; it can no longer re-queue
    its trial, so the supervisor fails it (worker_died), or it would stay RUNNING for good."""
    stubborn = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    progress = FakeProgress()
    supervisor = Supervisor(
        [script("stubborn", stubborn)],
        progress,
        watcher=progress,
        poll_seconds=0.05,
        stop_seconds=1,
    )
    interrupt_when(lambda: "ready" in progress.lines and bool(supervisor.procs))
    started = time.monotonic()
    assert supervisor.run() == 130
    assert time.monotonic() - started < 20
    assert supervisor.procs["stubborn"].returncode == -signal.SIGKILL
    assert [worker for worker, _ in progress.deaths] == ["stubborn"]
    assert "had not stopped 1 s after being asked" in progress.deaths[0][1]


def test_workers_that_stop_when_asked_have_nothing_failed_for_them():
    prompt = "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"
    progress = FakeProgress()
    supervisor = Supervisor(
        [script("quick", prompt)], progress, watcher=progress, poll_seconds=0.05
    )
    interrupt_when(lambda: "ready" in progress.lines and bool(supervisor.procs))
    assert supervisor.run() == 130
    assert progress.deaths == []


# ---- the circuit breaker in the supervisor ------------------------------------------------------


def test_workers_that_keep_dying_without_progress_stop_the_study(tmp_path: Path):
    starts = tmp_path / "starts"
    code = (
        f"import pathlib, sys; p = pathlib.Path({str(starts)!r}); "
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x'); sys.exit(3)"
    )
    progress = FakeProgress()
    supervisor = Supervisor(
        [script("doomed", code)], progress, watcher=progress, restart_dead=True, poll_seconds=0.05
    )
    assert supervisor.run() == 1
    assert starts.read_text() == "xxx", (
        "three starts, then it gave up instead of restarting for ever"
    )
    assert supervisor.stopped_because.startswith(
        "workers died 3 times in a row without a trial finishing"
    )
    assert any(
        line.startswith("stopping the study: workers died 3 times") for line in progress.lines
    )


def test_a_worker_that_exits_2_is_not_replaced(tmp_path: Path):
    starts = tmp_path / "starts"
    code = (
        f"import pathlib, sys; p = pathlib.Path({str(starts)!r}); "
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x'); sys.exit(2)"
    )
    progress = FakeProgress()
    assert (
        Supervisor(
            [script("refused", code)],
            progress,
            watcher=progress,
            restart_dead=True,
            poll_seconds=0.05,
        ).run()
        == 1
    )
    assert starts.read_text() == "x"
    assert "worker refused died (exit code 2)" in progress.lines


def test_trials_failing_the_same_way_stop_every_worker(tmp_path: Path):
    code = "import time; print('ready', flush=True); time.sleep(60)"
    progress = FakeProgress()
    supervisor = Supervisor(
        [script("a", code), script("b", code)], progress, watcher=progress, poll_seconds=0.05
    )

    def fail_five_trials():
        deadline = time.monotonic() + 20
        while progress.lines.count("ready") < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        for _ in range(5):
            progress.outcomes.append(("fail", "ValueError: the encoder's weights are unreadable"))
            time.sleep(0.1)

    threading.Thread(target=fail_five_trials, daemon=True).start()
    started = time.monotonic()
    assert supervisor.run() == 1
    assert time.monotonic() - started < 30, "the sleeping workers were stopped, not waited for"
    assert (
        supervisor.stopped_because
        == "5 trials in a row failed with: ValueError: the encoder's weights are unreadable"
    )
    assert all(proc.poll() is not None for proc in supervisor.procs.values())
