"""Storage plumbing: the one way hpo opens a study's storage (RDB or the gRPC proxy), what a
database error means, the heartbeat that keeps a running trial alive, and the study-wide lock.

Every use of Optuna's private surface lives here too, in ``_optuna_private`` alone
(``tests/study/test_optuna_private.py`` checks each piece against the installed Optuna).
"""

from hpo.study.storage._connect import (
    caused_by_database,
    check_storage,
    database_error_text,
    get_storage,
    rdb_backend,
    require_grpc,
)
from hpo.study.storage._db_problem import DatabaseProblem, database_problem
from hpo.study.storage._heartbeat import beating, fail_stale, first_heartbeat, heartbeat_interval
from hpo.study.storage._lock import StudyLock, study_lock
from hpo.study.storage._start_lock import trial_start_lock

__all__ = [
    "DatabaseProblem",
    "StudyLock",
    "beating",
    "caused_by_database",
    "check_storage",
    "database_error_text",
    "database_problem",
    "fail_stale",
    "first_heartbeat",
    "get_storage",
    "heartbeat_interval",
    "rdb_backend",
    "require_grpc",
    "study_lock",
    "trial_start_lock",
]
