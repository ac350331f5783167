"""The one gateway to Optuna and the study storage.

Everything else in hpo that needs a study, a storage, a trial count, an artifact or a
plot calls the names below; only this package (and the worker and objective, which run
Optuna's trial loop) import optuna. The machinery lives in the private modules.
"""

from hpo.study._budget import (
    start_time_budget,
    study_deadline,
    time_budget_spent,
)
from hpo.study._census import (
    SURPLUS,
    claim,
    is_surplus,
    recent_outcomes,
    room_for_a_trial,
    state_counts,
    trial_census,
    trial_outcomes,
    trial_start,
    trials_per_hour,
)
from hpo.study._dashboard import serve_dashboard
from hpo.study._db_problem import DatabaseProblem, database_problem
from hpo.study._find import (
    is_spec_file,
    load_existing_study,
    load_spec_ref,
    load_study_ref,
    record_spec,
    recorded_spec,
    spec_document,
)
from hpo.study._heartbeat import beating, fail_stale, first_heartbeat, heartbeat_interval
from hpo.study._lock import StudyLock, study_lock
from hpo.study._logs import log_through_hpo
from hpo.study._metric_attrs import metric_attrs, trial_metrics
from hpo.study._notes import trial_note, write_study_note, write_trial_note
from hpo.study._open import (
    check_spec,
    finished_study,
    first_look_epochs,
    make_pruner,
    make_sampler,
    open_study,
    rung_schedule,
    spec_fingerprint,
    study_exists,
    study_uid,
)
from hpo.study._plots import draw_plots, param_importances
from hpo.study._portfolio import portfolio_points
from hpo.study._proxy import proxy_storage, run_proxy_server, sweep_stale_trials
from hpo.study._sampler import StagedSampler
from hpo.study._space import sample_points, suggest
from hpo.study._storage import (
    caused_by_database,
    check_storage,
    database_error_text,
    get_storage,
    rdb_backend,
    require_grpc,
)
from hpo.study._strategy import (
    SearchPlan,
    handover,
    plan_search,
    read_trial_cost,
    record_trial_cost,
    recorded_plan,
)
from hpo.study._summary import best_trial, interval_words, study_status, study_summaries
from hpo.study._trials import (
    ARTIFACT_DIR,
    artifact_store,
    completed_trials,
    enqueue,
    fail_running,
    fail_trials_of_worker,
    find_trial,
    requeue,
    running_trials,
    set_user_attrs,
    upload,
)

__all__ = [
    "metric_attrs",
    "trial_metrics",
    "trial_note",
    "write_study_note",
    "write_trial_note",
    "SearchPlan",
    "StagedSampler",
    "handover",
    "plan_search",
    "portfolio_points",
    "read_trial_cost",
    "record_trial_cost",
    "recorded_plan",
    "best_trial",
    "interval_words",
    "study_status",
    "study_summaries",
    "SURPLUS",
    "ARTIFACT_DIR",
    "artifact_store",
    "beating",
    "caused_by_database",
    "DatabaseProblem",
    "database_problem",
    "check_spec",
    "check_storage",
    "claim",
    "completed_trials",
    "database_error_text",
    "draw_plots",
    "enqueue",
    "fail_running",
    "fail_stale",
    "fail_trials_of_worker",
    "finished_study",
    "first_heartbeat",
    "find_trial",
    "get_storage",
    "heartbeat_interval",
    "is_spec_file",
    "is_surplus",
    "load_existing_study",
    "log_through_hpo",
    "start_time_budget",
    "study_deadline",
    "time_budget_spent",
    "load_study_ref",
    "load_spec_ref",
    "record_spec",
    "recorded_spec",
    "spec_document",
    "make_pruner",
    "make_sampler",
    "rung_schedule",
    "first_look_epochs",
    "open_study",
    "param_importances",
    "rdb_backend",
    "proxy_storage",
    "recent_outcomes",
    "room_for_a_trial",
    "requeue",
    "running_trials",
    "require_grpc",
    "run_proxy_server",
    "sample_points",
    "serve_dashboard",
    "set_user_attrs",
    "state_counts",
    "StudyLock",
    "study_lock",
    "spec_fingerprint",
    "suggest",
    "study_exists",
    "study_uid",
    "sweep_stale_trials",
    "trial_census",
    "trial_start",
    "trial_outcomes",
    "trials_per_hour",
    "upload",
]
