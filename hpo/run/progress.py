"""The progress bar ``hpo tune`` shows over its workers' lines: finished/total trials, running,
pruned, failed and re-queued counts and the best value, read from the study by COUNT queries,
and kept through a database outage."""

from __future__ import annotations

import threading

from tqdm import tqdm

from hpo.errors import find_cause
from hpo.process import output_may_be_gone
from hpo.study import study_exists
from hpo.study.records import fail_trials_of_worker, recent_outcomes, state_counts
from hpo.study.storage import caused_by_database, database_problem


class StudyDeleted(Exception):
    """The study was deleted from its storage under a running tune: nothing left to run."""


class StudyProgress:
    """A tqdm bar of finished/total trials with running/pruned/failed/re-queued counts and the
    best value.

    While the database is unreachable (a restart, a network cut) the bar keeps the last
    counts it read and says so once; the workers retry on their own, and give up (and
    die, which the supervisor reports) if the outage lasts too long.
    """

    def __init__(self, study, n_trials: int, enabled: bool = True, max_retry: int = 0):
        self.study, self.n_trials, self.max_retry = study, n_trials, max_retry
        self.bar = tqdm(total=n_trials, unit="trial", disable=not enabled, dynamic_ncols=True)
        self._lock = threading.Lock()
        self._counts = {
            "finished": 0,
            "running": 0,
            "pruned": 0,
            "failed": 0,
            "requeued": 0,
            "best": None,
        }
        self._outage: str | None = None  # the kind of database problem being waited out

    def done(self) -> bool:
        return self._poll()["finished"] >= self.n_trials

    def finished(self) -> int:
        return self._counts["finished"]

    def failed(self) -> int:
        """Trials that failed, re-queued or not: the circuit breaker looks again when it grows."""
        return self._counts["failed"] + self._counts["requeued"]

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
                self.write(f"trial {number} failed with its worker and was re-queued")
        except Exception as exc:
            self._ride_out(exc)

    def refresh(self) -> None:
        counts = self._poll()
        best = "-" if counts["best"] is None else f"{counts['best']:.4f}"
        with self._lock:
            self.bar.n = min(counts["finished"], self.n_trials)
            with output_may_be_gone():  # the terminal was closed: the supervision goes on
                requeued = f" re-queued={counts['requeued']}" if counts["requeued"] else ""
                self.bar.set_postfix_str(
                    f"running={counts['running']} pruned={counts['pruned']} "
                    f"failed={counts['failed']}{requeued} best={best}"
                )

    def _poll(self) -> dict:
        """The study's counts now, or the last ones read while the database is unreachable."""
        try:
            self._counts = state_counts(self.study)
        except Exception as exc:
            self._ride_out(exc)
            return self._counts
        if self._outage:
            self._outage = None
            self.write("database reachable again")
        return self._counts

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
            self.write(f"{problem}; waiting for it, the workers retry on their own")

    def write(self, line: str) -> None:
        with self._lock, output_may_be_gone():
            self.bar.write(line)

    def close(self) -> None:
        with output_may_be_gone():
            self.bar.close()
