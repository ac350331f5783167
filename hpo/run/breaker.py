"""When to give up on a study that can only fail: a circuit breaker for the launcher.

A setting that fails at run time (a max_length too short for the criteria, an unwritable
output_dir, an encoder that cannot load) fails every trial the same way; with
``--restart-dead`` the workers would be replaced for ever. The launcher feeds this what it
sees and stops the study with the reason on one line once the pattern is clear.
"""

from __future__ import annotations

from collections.abc import Sequence

FAILED_TRIALS_LIMIT = 5  # trials in a row that failed the same way
WORKER_DEATHS_LIMIT = 3  # worker exits in a row with no trial finished in between


class CircuitBreaker:
    def __init__(
        self, failed_trials: int = FAILED_TRIALS_LIMIT, worker_deaths: int = WORKER_DEATHS_LIMIT
    ):
        self.failed_trials, self.worker_deaths = failed_trials, worker_deaths
        self._deaths, self._finished_at_last_death = 0, -1

    def check_trials(self, recent: Sequence[tuple[str, str | None]]) -> str | None:
        """``recent``: the last trials to end, oldest first, as (state, fail_reason).
        A reason to stop when the last ``failed_trials`` all failed with one reason."""
        last = list(recent)[-self.failed_trials :]
        if len(last) < self.failed_trials or any(state != "fail" for state, _ in last):
            return None
        reasons = {_first_line(reason) for _, reason in last}
        if len(reasons) != 1:
            return None
        return (
            f"{self.failed_trials} trials in a row failed with: "
            f"{reasons.pop() or 'no reason recorded'}"
        )

    def worker_exited(self, exit_code: int, finished: int) -> str | None:
        """A worker ended with ``exit_code`` while the study held ``finished`` trials. A
        reason to stop when workers keep dying and no trial finishes in between."""
        if exit_code == 0:
            return None
        self._deaths = self._deaths + 1 if finished == self._finished_at_last_death else 1
        self._finished_at_last_death = finished
        if self._deaths < self.worker_deaths:
            return None
        return (
            f"workers died {self._deaths} times in a row without a trial finishing "
            f"(last exit code {exit_code}); see the worker log lines above"
        )


def _first_line(reason: str | None) -> str | None:
    return reason.strip().splitlines()[0] if reason and reason.strip() else None
