"""The one gateway to Optuna and the study storage, in three rooms under a small face.

- ``hpo.study``: opening a spec's study, and what the CLI shows of studies (their best
  trial, status, plots, the dashboard) and the storage proxy;
- ``hpo.study.records``: what a study records (its trials, their census, metrics, notes and
  artifacts, the spec it was opened with);
- ``hpo.study.search``: the sampler, pruner, auto plan, search space and time budget;
- ``hpo.study.storage``: the storage itself, database errors, heartbeats and the study lock.

Search and records sit over storage; this face over all three (the import contracts say so).
Everything else in hpo that needs a study imports these faces; only this package (and the
worker, its interrupt and the objective, which run Optuna's trial loop) import optuna. The
machinery lives in the private modules.
"""

from hpo.study._dashboard import serve_dashboard
from hpo.study._logs import log_through_hpo
from hpo.study._open import (
    check_spec,
    existing_spec_change,
    finished_study,
    open_study,
    spec_fingerprint,
    study_exists,
)
from hpo.study._plots import draw_plots, param_importances
from hpo.study._proxy import proxy_storage, run_proxy_server, sweep_stale_trials
from hpo.study._summary import (
    BestTrial,
    StudyListing,
    StudyStatus,
    best_trial,
    interval_words,
    study_status,
    study_summaries,
)

__all__ = [
    "BestTrial",
    "StudyListing",
    "StudyStatus",
    "best_trial",
    "check_spec",
    "draw_plots",
    "existing_spec_change",
    "finished_study",
    "interval_words",
    "log_through_hpo",
    "open_study",
    "param_importances",
    "proxy_storage",
    "run_proxy_server",
    "serve_dashboard",
    "spec_fingerprint",
    "study_exists",
    "study_status",
    "study_summaries",
    "sweep_stale_trials",
]
