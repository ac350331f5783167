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

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="POSIX signals, PR_SET_PDEATHSIG and ptys"
)
REPO = Path(__file__).resolve().parents[1]
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
        cwd=Path(__file__).resolve().parents[1],
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(goes)
