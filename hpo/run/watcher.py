"""What ``hpo tune``'s supervisor knows of the study while its workers run: the trial counts
(COUNT queries), the last trials to end, and the failing of a dead worker's trials, kept
through a database outage. The bar that shows the counts is a view of its own
(``hpo.run.progress``): it reads, this decides."""

from __future__ import annotations

from collections.abc import Callable

from hpo.errors import find_cause
from hpo.study import study_exists
from hpo.study.records import TrialCounts, fail_trials_of_worker, recent_outcomes, state_counts
from hpo.study.storage import caused_by_database, database_problem


class StudyDeleted(Exception):
    """The study was deleted from its storage under a running tune: nothing left to run."""


class StudyWatcher:
    """The study's counts as last read, and the supervisor's questions about them.

    While the database is unreachable (a restart, a network cut) it keeps the last counts it
    read and says so once (``say``); the workers retry on their own, and give up (and die,
    which the supervisor reports) if the outage lasts too long.
    """

    def __init__(self, study, n_trials: int, say: Callable[[str], None], max_retry: int = 0):
        self.study, self.n_trials, self.say, self.max_retry = study, n_trials, say, max_retry
        self.counts = TrialCounts()  # none read yet
        self._outage: str | None = None  # the kind of database problem being waited out

    def poll(self) -> TrialCounts:
        """The study's counts now, or the last ones read while the database is unreachable."""
        try:
            self.counts = state_counts(self.study)
        except Exception as exc:
            self._ride_out(exc)
            return self.counts
        if self._outage:
            self._outage = None
            self.say("database reachable again")
        return self.counts

    def done(self) -> bool:
        return self.poll().finished >= self.n_trials

    def finished(self) -> int:
        return self.counts.finished

    def failed(self) -> int:
        """Trials that failed, re-queued or not: the circuit breaker looks again when it grows."""
        return self.counts.failed + self.counts.requeued

    def recent_outcomes(self, k: int) -> list[tuple[str, str | None]]:
        """The last ``k`` trials to end, oldest first; none while the database is unreachable."""
        try:
            return recent_outcomes(self.study, k)
        except Exception as exc:
            self._ride_out(exc)
            return []

    def worker_died(self, worker: str, how: str) -> None:
        """Fail the dead worker's RUNNING trials at once, saying how it died, and queue their
        retries; without this they would wait for a heartbeat sweep that, once the launcher
        exits, nobody runs. While the database is unreachable the heartbeat does it later."""
        try:
            for number in fail_trials_of_worker(
                self.study, worker, f"worker {worker} {how}", self.max_retry
            ):
                self.say(f"trial {number} failed with its worker and was re-queued")
        except Exception as exc:
            self._ride_out(exc)

    def _ride_out(self, exc: Exception) -> None:
        """Return when ``exc`` is a database error the workers ride out too (any of them: a
        restart, a revoked privilege, a dropped table), saying once per outage what is wrong;
        raise ``StudyDeleted`` when the study was deleted under us, and anything else as is."""
        if find_cause(exc, lambda seen: isinstance(seen, KeyError)) and not study_exists(
            self.study
        ):
            raise StudyDeleted(
                f"study {self.study.study_name!r} was deleted from its storage while it ran"
            ) from None
        if not caused_by_database(exc):
            raise exc
        problem = database_problem(self.study, exc)
        if problem.kind != self._outage:  # a new outage, or a different one
            self._outage = problem.kind
            self.say(f"{problem}; waiting for it, the workers retry on their own")
