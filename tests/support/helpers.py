"""What several test files need alike: a free port, the ``hpo`` CLI run as a user runs it,
and the rule for a tool this machine lacks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import NoReturn

import pytest

from hpo.cli import main
from tests.support import FINAL_SUMMARIES


def unavailable(problem: str) -> NoReturn:
    """A test needs what this machine lacks (a server, a browser, a scheduler): skipped on a
    workstation, failed in CI, which provides all of them (.ci/run), so that no case goes
    unrun there unnoticed."""
    if os.environ.get("CI"):
        pytest.fail(problem)
    pytest.skip(problem)


def hpo(capsys, *argv: str) -> tuple[int, str, str]:
    """``hpo ARGV`` in this process: its exit code, standard output and standard error."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def hpo_argv(*args: str) -> list[str]:
    """The command line of ``hpo ARGS``, run by this interpreter, so on the code under test."""
    return [sys.executable, "-m", "hpo", *args]


def run_hpo(*args: str, timeout: float = 900, **run) -> subprocess.CompletedProcess:
    """``hpo ARGS`` in a child process, its output captured as text; ``run``: more keywords of
    ``subprocess.run`` (cwd, env). The timeout only ends a run that hangs."""
    return subprocess.run(hpo_argv(*args), capture_output=True, text=True, timeout=timeout, **run)


def final_summary(shape: str = "cv", **parts) -> dict:
    """A real metrics.json that ``hpo finalize`` wrote (tests/support/final_summaries/SHAPE),
    with ``parts`` replacing its top-level keys: a summary of the shape the readers check."""
    import json

    path = FINAL_SUMMARIES / shape / "metrics.json"
    return json.loads(path.read_text()) | parts
