"""The progress bar of `hpo tune` (and finalize and predict): drawn only where standard error is
a terminal, unless asked for (issue #48 item 4: `make demo > log 2>&1` held 93 carriage returns
with log lines glued to bar fragments); and its counts through a database outage."""

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


# ---- the study watcher while the database is unreachable, and the bar showing it ----------------


def test_progress_keeps_the_last_counts_through_a_database_outage_and_says_so_once(
    monkeypatch, capsys
):
    import sqlalchemy as sa

    from hpo.run import watcher as watcher_module
    from hpo.run.progress import StudyProgress
    from hpo.study.records import TrialCounts

    def counts(finished: int) -> TrialCounts:
        return TrialCounts(complete=finished, running=2, best=0.5)

    outage = sa.exc.OperationalError(
        "SELECT", {}, Exception("connection refused\nIs the server running?")
    )
    answers = iter(
        [counts(3), outage, outage, outage, counts(5), outage, counts(9), ValueError("a bug")]
    )

    def state_counts(study):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(watcher_module, "state_counts", state_counts)
    progress = StudyProgress(n_trials=5, enabled=False)
    watcher = watcher_module.StudyWatcher(None, 5, progress.write)

    def refresh() -> None:  # as the supervisor does: the watcher reads, the bar shows
        progress.refresh(watcher.poll())

    refresh()
    assert not watcher.done() and progress.bar.n == 3  # the outage began: the last counts stand
    refresh()
    refresh()
    assert progress.bar.n == 3
    refresh()  # back
    assert progress.bar.n == 5
    assert watcher.done()  # a second outage: the last counts say done
    refresh()
    assert progress.bar.n == 5
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines
        == [
            "database unreachable (connection refused); "
            "waiting for it, the workers retry on their own",
            "database reachable again",
        ]
        * 2
    )
    with pytest.raises(ValueError, match="a bug"):  # only database errors are waited out
        refresh()
