"""The start of a study, one sequence for ``hpo tune`` and ``hpo submit``: the checks, the study
created (or reopened, its spec recorded), its time budget started and tracking prepared, all
before any worker runs a trial, so that workers never race to do any of it."""

from __future__ import annotations

import time
from dataclasses import dataclass

from hpo.run.preflight import preflight
from hpo.spec import StudySpec
from hpo.tracking import Tracker


@dataclass(frozen=True)
class Started:
    study: object  # the Optuna study
    deadline: float | None  # the time budget's end (epoch seconds); None: no budget

    def budget_text(self, queued: bool = False) -> str:
        """``, a time budget until 14:05:00``, for the line that says the study started."""
        if not self.deadline:
            return ""
        until = time.strftime("%H:%M:%S", time.localtime(self.deadline))
        return f", a time budget until {until}" + (" (queue time included)" if queued else "")


def start_study(spec: StudySpec, allow_spec_change: bool = False, note: bool = True) -> Started:
    """Check everything, then open the study and start its clock: a failed check raises before
    anything exists. ``note``: write the dashboard note now (``hpo tune`` writes it once its
    workers are released)."""
    from hpo.study import open_study
    from hpo.study.search import start_time_budget

    preflight(spec, notes=False)
    study = open_study(spec, allow_spec_change=allow_spec_change, note=note)
    # from the moment the study is open: every worker reads the one deadline from it
    deadline = start_time_budget(study, spec.timeout)
    Tracker(spec.tracking.mlflow, spec.name).prepare()  # as the study: no worker races to
    return Started(study, deadline)
