"""The style pyproject.toml configures holds on every file: ruff's rules (line length included)
and ruff's formatting, as `make lint` checks them."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

RUFF = Path(sys.executable).parent / "ruff"


@pytest.mark.parametrize("check", [["check"], ["format", "--check"]], ids=["rules", "format"])
def test_the_code_keeps_the_configured_style(check):
    done = subprocess.run(
        [str(RUFF), *check, "hpo", "tests", "bench"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
