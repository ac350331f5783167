"""The progress bar of `hpo tune` (and finalize and predict): drawn only where standard error is
a terminal, unless asked for (issue #48 item 4: `make demo > log 2>&1` held 93 carriage returns
with log lines glued to bar fragments). Its counts through a database outage are
tests/run/test_watcher.py's, which decides them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hpo.spec import set_flags
from tests.support import REPO
from tests.support.tune_cli import study_sets, tune_assets


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta):
    return tune_assets(tmp_path_factory.mktemp("progress"), tiny_roberta, tiny_deberta, posts=40)


def _tune(name: str, storage: str, assets: dict, *extra: str) -> bytes:
    """`hpo tune` of one more one-epoch trial on the smoke spec, its stdout and stderr one pipe:
    what a Slurm or CI log holds. Bytes: text mode would turn a carriage return into a newline."""
    sets = [
        *study_sets(name, assets),
        "train.epochs=1",
        "keep_top_k=0",
        "pruner={name: none}",
        "search_space.encoder.choices=[tiny-roberta]",
        "search_space.criteria_formulation.choices=[multilabel]",
    ]
    cmd = [sys.executable, "-m", "hpo", "tune", str(REPO / "studies" / "criteria-smoke.yaml")]
    run = subprocess.run(
        [*cmd, "--storage", storage, *set_flags(sets), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=600,
        cwd=assets["root"],
    )
    assert run.returncode == 0, run.stdout.decode()[-3000:]
    return run.stdout


@pytest.mark.slow
def test_no_bar_where_the_output_is_a_pipe_unless_progress_is_asked_for(
    sqlite_url, study_name, assets
):
    logged = _tune(study_name, sqlite_url, assets, "--set", "n_trials=1")
    assert b"trial 0 COMPLETE" in logged and b"ran for " in logged
    assert b"\r" not in logged and b"trial/s" not in logged, logged.decode()[-3000:]

    forced = _tune(study_name, sqlite_url, assets, "--set", "n_trials=2", "--progress")
    assert b"trial 1 COMPLETE" in forced
    assert b"\r" in forced and b"1/2 [" in forced, forced.decode()[-3000:]
