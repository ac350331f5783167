"""What `hpo tune`'s supervisor knows of the study (hpo.run.watcher): through a database outage
it keeps the last counts it read and says so once, and the bar shows them; any other error is
not waited out."""

from __future__ import annotations

import pytest


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
