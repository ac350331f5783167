"""Process chores: stop signals, a worker that follows its launcher out, output to a
terminal that was closed. Real processes, no mocks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hpo.process import interruptible
from tests.support import REPO

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="POSIX signals, PR_SET_PDEATHSIG and ptys"
)
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
}

# A child that records how it ended: the SIGTERM its parent's death sends, or outliving it.
CHILD = textwrap.dedent("""
    import os, pathlib, signal, sys, time
    from hpo import process
    record, how, delay, parent = pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), \
int(sys.argv[4])
    def stopped(*_):
        record.write_text("SIGTERM")
        sys.exit(0)
    signal.signal(signal.SIGTERM, stopped)
    time.sleep(delay)  # with a delay, the parent is gone before the child asks to follow it
    if how == "prctl":
        process.exit_with_parent(parent)
    else:
        process._watch_parent(parent, poll_seconds=0.1)
    record.write_text("armed")
    time.sleep(20)
    record.write_text("outlived its parent")
""")
# The parent: starts the child, says its PID, lives a while, exits without waiting for it.
PARENT = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', sys.argv[1], *sys.argv[2:5], "
    "str(os.getpid())],\n"
    "                         stdout=subprocess.DEVNULL)\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(float(sys.argv[5]))\n"
)


@pytest.mark.parametrize(
    ("how", "child_delay", "parent_lives"),
    [
        ("prctl", 0, 1.5),  # Linux: the kernel sends SIGTERM when the parent dies
        ("poll", 0, 1.5),  # elsewhere: a thread notices the parent PID changed
        (
            "prctl",
            1.0,
            0,
        ),  # the parent died before the child armed the signal: the child notices at once
    ],
    ids=["prctl", "poll", "parent-already-gone"],
)
def test_a_child_is_sent_sigterm_when_its_parent_dies(tmp_path, how, child_delay, parent_lives):
    record = tmp_path / "record"
    parent = subprocess.run(
        [
            sys.executable,
            "-c",
            PARENT,
            CHILD,
            str(record),
            how,
            str(child_delay),
            str(parent_lives),
        ],
        env=ENV,
        stdout=subprocess.PIPE,
        text=True,
        timeout=30,
    )
    child = int(parent.stdout.split()[0])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (
            # '': a write_text caught between its truncation and its write
            not record.exists() or record.read_text() in ("", "armed")
        ):
            time.sleep(0.05)
        assert record.read_text() == "SIGTERM"
    finally:
        if Path(f"/proc/{child}").exists():
            os.kill(child, signal.SIGKILL)


def test_a_second_stop_signal_does_not_cut_the_clean_up_short():
    """The first SIGINT/SIGTERM/SIGHUP raises KeyboardInterrupt; more of them (the launcher's
    death signal, a second Ctrl-C) while its clean-up re-queues a trial or stops workers are
    ignored."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    cleaned_up = False
    with pytest.raises(KeyboardInterrupt), interruptible():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except KeyboardInterrupt:
            for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
                os.kill(os.getpid(), sig)
                time.sleep(0.05)
            cleaned_up = True
            raise
    assert cleaned_up
    assert {sig: signal.getsignal(sig) for sig in before} == before


# A worker-like child that follows its parent out, killed mid-"trial" while a finalizer runs: the
# garbage collector runs weakref callbacks and __del__ methods (sqlalchemy's class registry has
# one) as Python code, and what the stop signal raises there is printed and dropped, not raised.
FINALIZING_CHILD = textwrap.dedent("""
    import os, sys, time
    from hpo.process import exit_with_parent, interruptible
    parent = os.getppid()
    exit_with_parent(parent)
    class Garbage:
        def __del__(self):
            print("finalizing", flush=True)
            os.kill(parent, 9)  # the launcher is killed while a finalizer runs
            deadline = time.monotonic() + 5
            while os.getppid() == parent and time.monotonic() < deadline:
                pass  # its death signal is handled in here, in Python code the collector runs
            for _ in range(100_000):
                pass
            print("the death signal came after the finalizer", flush=True)
    try:
        with interruptible():
            Garbage()
            trained_until = time.monotonic() + 10  # a trial's steps, for longer than the test waits
            while time.monotonic() < trained_until:
                time.sleep(0.01)
            print("outlived its launcher", flush=True)
    except KeyboardInterrupt:
        print("stopped", flush=True)
""")


def test_a_death_signal_landing_in_a_finalizer_still_stops_the_worker():
    """The launcher's kill -9 is handled while the collector runs a finalizer, where the
    KeyboardInterrupt it raises cannot propagate (seen in `hpo tune`: in sqlalchemy's weakref
    callback while a trial tokenized). The death signal comes once; the worker must still stop
    (re-queueing its trial) instead of training on deaf to every later stop signal."""
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', sys.argv[1]])\n"
            "time.sleep(30)\n",
            FINALIZING_CHILD,
        ],
        env=ENV,
        stdout=subprocess.PIPE,  # the child's too: read to its end once both have exited
        stderr=subprocess.DEVNULL,
        text=True,
    )
    started = time.monotonic()
    try:
        said, _ = launcher.communicate(timeout=30)
    finally:
        launcher.kill()
    assert launcher.returncode == -signal.SIGKILL
    assert said.splitlines() == ["finalizing", "stopped"], said
    assert time.monotonic() - started < 8, "stopped at once, not after its 10 s of training"


def test_output_to_a_closed_terminal_is_dropped_without_an_error(tmp_path):
    """Writes that fail with EIO (the terminal window closed) are dropped, and so is all
    later output, so a clean-up that prints as it goes, and the exit, still succeed."""
    go = tmp_path / "go"
    code = textwrap.dedent(f"""
        import pathlib, sys, time
        from hpo.process import output_may_be_gone
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.02)
        with output_may_be_gone():
            print("into a closed terminal")
        print("and again")
        sys.stderr.write("and on stderr\\n")
        pathlib.Path({str(go)!r}).write_text("done")
        sys.exit(7)
    """)
    terminal, side = os.openpty()
    child = subprocess.Popen(
        [sys.executable, "-c", code], env=ENV, stdin=subprocess.DEVNULL, stdout=side, stderr=side
    )
    os.close(side)
    os.close(terminal)  # closed before the child writes anything
    go.touch()
    # not 1 (an OSError) nor 120 (stdout failed to flush at exit)
    assert child.wait(timeout=30) == 7
    assert go.read_text() == "done"


@pytest.mark.parametrize(("stdin", "goes"), [("go\n", True), ("", False), ("stop\n", False)])
def test_a_waiting_worker_goes_only_on_the_launchers_go(stdin, goes):
    code = "from hpo.process import await_go; print(await_go())"
    run = subprocess.run(
        [sys.executable, "-c", code],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(goes)


# ---- threads from what the machine leaves free (issue #55 item 11) -----------------------------


@pytest.mark.parametrize(
    ("load", "free", "said"),
    [
        (0.0, 2, None),  # a quiet machine: every core
        (0.3, 2, None),  # a shell's flicker is not other work
        (1.0, 1, "1 of 2 cores are busy with other work (load 1.0): 1 thread a retraining"),
        (6.5, 1, "1 of 2 cores are busy with other work (load 6.5)"),
    ],
)
def test_threads_are_the_cores_other_work_leaves_idle_and_a_cut_is_said(
    monkeypatch, load, free, said
):
    """The real job's finalize beside two other trainings: 1.2 examples/s on 2 threads, 7.0 on
    1. The last minute's load is the machine's input here (os.getloadavg), set per case."""
    from hpo.process import available_cpus, free_cpus, threads_per_process

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    found = free_cpus()
    assert (found.cpus, found.available) == (free, available_cpus()) == (free, 2)
    assert threads_per_process(1) == free
    assert threads_per_process(1, threads=2) == 2, "--threads is the user's word"
    assert threads_per_process(2, cpus=2) == 1, "given cpus are taken as they are"
    line = found.words(threads_per_process(1), "a retraining")
    assert (line is None) if said is None else (said in line and line.endswith("sets it"))


@pytest.mark.parametrize(
    ("cpu_max", "cpus"), [("200000 100000\n", 2), ("50000 100000\n", 1), ("max 100000\n", 8)]
)
def test_a_containers_cpu_quota_caps_the_cores(monkeypatch, tmp_path, cpu_max, cpus):
    import hpo.process

    quota = tmp_path / "cpu.max"
    quota.write_text(cpu_max)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    real = hpo.process._cgroup_quota
    monkeypatch.setattr(hpo.process, "_cgroup_quota", lambda: real(str(quota)))
    assert hpo.process.available_cpus() == cpus
