"""The progress bar ``hpo tune`` shows over its workers' lines: finished/total trials, running,
pruned, failed and re-queued counts and the best value. A view: the counts come from the
study's watcher (``hpo.run.watcher``), which alone reads and changes the study."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from tqdm import tqdm

from hpo.process import output_may_be_gone

if TYPE_CHECKING:
    from hpo.study.records import TrialCounts


class StudyProgress:
    """A tqdm bar of finished/total trials with running/pruned/failed/re-queued counts and the
    best value; the lines of the workers and the watcher are written above it."""

    def __init__(self, n_trials: int, enabled: bool = True):
        self.n_trials = n_trials
        self.bar = tqdm(total=n_trials, unit="trial", disable=not enabled, dynamic_ncols=True)
        self._lock = threading.Lock()

    def refresh(self, counts: TrialCounts) -> None:
        best = "-" if counts.best is None else f"{counts.best:.4f}"
        with self._lock:
            self.bar.n = min(counts.finished, self.n_trials)
            with output_may_be_gone():  # the terminal was closed: the supervision goes on
                requeued = f" re-queued={counts.requeued}" if counts.requeued else ""
                self.bar.set_postfix_str(
                    f"running={counts.running} pruned={counts.pruned} "
                    f"failed={counts.failed}{requeued} best={best}"
                )

    def write(self, line: str) -> None:
        with self._lock, output_may_be_gone():
            self.bar.write(line)

    def close(self) -> None:
        with output_may_be_gone():
            self.bar.close()
