"""What several test files need alike."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(problem: str) -> NoReturn:
    """A test needs what this machine lacks (a server, a browser, a scheduler): skipped on a
    workstation, failed in CI, which provides all of them (.ci/run), so that no case goes
    unrun there unnoticed."""
    if os.environ.get("CI"):
        pytest.fail(problem)
    pytest.skip(problem)
