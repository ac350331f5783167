"""Every use hpo makes of Optuna's private surface, in this one module, each saying why.

Optuna's public API serves everything else. What it does not offer, hpo needs for speed and
for failing a trial with its reason: the ids every storage method takes, the RDBStorage
under the cache wrapper, its tables for one-statement SQL (each saves round trips on every
trial: bench P3), its per-attribute upsert inside a transaction of ours, the stale-trial
question its ``fail_stale_trials`` asks, its cache wrapper for the gRPC proxy, and the text of
one warning.

tests/study/test_optuna_private.py checks each name, signature, table column and behaviour
assumed here against the installed Optuna, and fails loudly when a release changes one.
Nothing else in hpo imports ``optuna.*._`` modules or reads an ``_``-attribute of Optuna's.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import optuna
from optuna.storages import BaseStorage, RDBStorage
from optuna.storages._rdb import models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.trial import FrozenTrial
from sqlalchemy.orm import Session

# Optuna's tables (optuna/storages/_rdb/models.py). hpo's hand-built statements on them: the
# heartbeat upsert and stale-trial query (_heartbeat.py), failing a stale trial with its reason
# in one transaction (_heartbeat.py), and the trial census in one GROUP BY (_census.py), with
# the re-queued and surplus trials counted beside it (the system attribute Optuna's retry
# callback writes on a retry, the fail_reason of a surplus trial).
TrialModel = models.TrialModel
TrialHeartbeatModel = models.TrialHeartbeatModel
TrialUserAttributeModel = models.TrialUserAttributeModel
TrialSystemAttributeModel = models.TrialSystemAttributeModel

# Optuna warns with this text (a plain UserWarning, no category of its own) on every ask and
# tell of a storage with heartbeats outside Study.optimize. The worker runs its own trial loop
# and beats its trials itself (hpo/run/worker.py), so the reminder is noise for every trial.
HEARTBEAT_REMINDER = "Heartbeat of storage is supposed to be used with Study.optimize"


def quiet_heartbeat_reminder() -> None:
    warnings.filterwarnings("ignore", message=HEARTBEAT_REMINDER)


def study_storage(study: optuna.Study) -> BaseStorage:
    """The storage a study was opened on (``Study._storage``): Optuna makes it public on a
    Trial (``trial.storage``), not on a Study, and the census, the stale-trial sweep and the
    study lock start from a study."""
    return study._storage


def study_id(study: optuna.Study) -> int:
    """A study's row id (``Study._study_id``), the key of every storage call and table query.
    The public way, ``storage.get_study_id_from_name``, costs a query each time."""
    return study._study_id


def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    """A trial's row id (``_trial_id``), which every storage method on one trial takes. The
    public way, ``get_trial_id_from_study_id_trial_number``, costs a query, and a running
    trial's id is needed for every heartbeat."""
    return trial._trial_id


def cached(storage: BaseStorage) -> BaseStorage:
    """An RDBStorage in Optuna's cache wrapper, which reads only new or running trials: what
    Optuna advises in front of its gRPC proxy. ``optuna.storages.get_storage`` is the only way
    to build one, and its docstring calls it "only for internal usage"."""
    return optuna.storages.get_storage(storage)


def uncached(storage: BaseStorage) -> BaseStorage:
    """The storage under Optuna's cache wrapper (``_CachedStorage._backend``):
    ``optuna.storages.get_storage`` wraps every RDBStorage in one, and hpo's own SQL needs
    the RDBStorage's engine; any other storage is returned as it is."""
    return getattr(storage, "_backend", storage)


@contextmanager
def attrs_session(backend: RDBStorage) -> Iterator[Session]:
    """A session that commits when the block ends, rolls back on an error and, as Optuna's
    own writes do, turns a lost race on an attribute row (IntegrityError) into a no-op
    (``_create_scoped_session(..., ignore_integrity_error=True)``): several attributes and
    a read share one round of the database instead of a commit each."""
    with _create_scoped_session(backend.scoped_session, True) as session:
        yield session


def set_user_attr_in(
    session: Session, backend: RDBStorage, trial_id: int, key: str, value: object
) -> None:
    """Optuna's own upsert of one user attribute (``RDBStorage._set_trial_attr_without_commit``),
    with its check that the trial is still running (UpdateFinishedTrialError), inside
    ``session``: its public ``set_trial_user_attr`` commits every attribute on its own."""
    backend._set_trial_attr_without_commit(session, TrialUserAttributeModel, trial_id, key, value)


class AnswersStaleTrialQuestion:
    """Mixed into an RDBStorage that defines ``stale_trial_ids``: Optuna's ``fail_stale_trials``
    (and ``study.optimize``, and a dashboard) asks a heartbeat storage for its stale trials
    through the private abstract ``BaseHeartbeat._get_stale_trial_ids``; this answers with
    hpo's one-statement query, so every caller gets the same answer."""

    def stale_trial_ids(self, study_id: int) -> list[int]:
        raise NotImplementedError

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        return self.stale_trial_ids(study_id)


__all__ = [
    "HEARTBEAT_REMINDER",
    "AnswersStaleTrialQuestion",
    "TrialHeartbeatModel",
    "TrialModel",
    "TrialUserAttributeModel",
    "attrs_session",
    "cached",
    "quiet_heartbeat_reminder",
    "set_user_attr_in",
    "study_id",
    "study_storage",
    "trial_id",
    "uncached",
]
