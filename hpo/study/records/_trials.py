"""What happens to single trials outside Optuna's own loop: queueing a hand-given one,
re-queueing an interrupted or stale one, recording many attributes at once, and the files
(artifacts) a trial leaves for the dashboard."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import optuna
from optuna.artifacts import FileSystemArtifactStore, upload_artifact
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.orm import Session

from hpo.attributes import FAIL_REASON_ATTR, TRAIN_SHARE_ATTR, WORKER_ATTR
from hpo.spec import SpecError, StudySpec
from hpo.study.storage._connect import rdb_backend
from hpo.study.storage._heartbeat import without_fail_reason
from hpo.study.storage._optuna_private import (
    attrs_session,
    set_user_attr_in,
    study_storage,
    trial_id,
)
from hpo.study.storage._start_lock import trial_start_lock

ARTIFACT_DIR = "artifacts"  # under output_dir: one store, so one dashboard serves every study


def enqueue(
    study: optuna.Study,
    spec: StudySpec,
    point: dict[str, object],
    user_attrs: Mapping[str, object] | None = None,
) -> bool:
    """Queue one hand-given parameter set (a warm start, a portfolio point, ``hpo enqueue``),
    checked against the search space, with ``user_attrs`` on its trial; names left out are
    sampled. False when an equal set was already queued or run."""
    if problem := spec.point_problem(point):
        key, text = problem
        raise SpecError(f"{spec.source}: {key}: {text}" if key else f"{spec.source}: {text}")
    waiting = (TrialState.WAITING,)
    before = len(study.get_trials(deepcopy=False, states=waiting))
    study.enqueue_trial(
        spec.typed_point(point), user_attrs=dict(user_attrs or {}), skip_if_exists=True
    )
    return len(study.get_trials(deepcopy=False, states=waiting)) > before


def artifact_store(output_dir: str | Path) -> FileSystemArtifactStore:
    """The artifact store of ``output_dir``; on several machines put output_dir on shared
    storage."""
    path = Path(output_dir) / ARTIFACT_DIR
    path.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(str(path))


def upload(
    store: FileSystemArtifactStore,
    trial: optuna.Trial | optuna.Study,
    path: Path,
    name: str | None = None,
) -> str:
    """Attach the file at ``path`` to ``trial`` (or a whole study), named ``name`` (default:
    its own name; the dashboard lists artifacts by it); returns the artifact id."""
    if name is None or name == path.name:
        return upload_artifact(artifact_store=store, file_path=str(path), study_or_trial=trial)
    with tempfile.TemporaryDirectory() as folder:  # Optuna names an artifact after its file
        named = Path(folder) / name
        shutil.copyfile(path, named)
        return upload_artifact(artifact_store=store, file_path=str(named), study_or_trial=trial)


def completed_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The completed full runs: what a study is judged by (its best, finalize's choice, the
    kept checkpoints). A low-fidelity run scores a configuration on less training data, so it
    only ranks configurations for promotion (``screened_trials``)."""
    return [t for t in _complete(study) if TRAIN_SHARE_ATTR not in t.user_attrs]


def screened_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The completed low-fidelity runs (spec ``fidelity``)."""
    return [t for t in _complete(study) if TRAIN_SHARE_ATTR in t.user_attrs]


def best_full_trial(study: optuna.Study) -> FrozenTrial | None:
    """``study.best_trial`` among the full runs: Optuna's own would also weigh low-fidelity
    runs, whose values are on another footing."""
    trials = completed_trials(study)
    if not trials:
        return None
    pick = max if study.direction == optuna.study.StudyDirection.MAXIMIZE else min
    return pick(trials, key=lambda t: t.value)


def _complete(study: optuna.Study) -> list[FrozenTrial]:
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))


def running_trials(study: optuna.Study) -> list[FrozenTrial]:
    return study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))


def find_trial(study: optuna.Study, number: int) -> FrozenTrial | None:
    return next((t for t in study.get_trials(deepcopy=False) if t.number == number), None)


def requeue(study: optuna.Study, trial: FrozenTrial, max_retry: int) -> None:
    """Queue a WAITING copy of a failed ``trial`` with the same parameters, unless it was
    retried ``max_retry`` times already (Optuna's own retry callback, so the dashboard
    shows the retry history). The copy has not failed: it does not inherit ``fail_reason``."""
    RetryHeartbeatStaleTrialCallback(max_retry=max_retry)(study, without_fail_reason(trial))


def set_user_attrs(trial: optuna.Trial, attrs: Mapping[str, object]) -> None:
    """Record several user attributes of a running trial in one transaction: one commit
    (an fsync on PostgreSQL) instead of one per attribute. Hand-written because Optuna's
    storages set one attribute per call; elsewhere (the gRPC proxy) it does just that."""
    backend = rdb_backend(trial.storage)
    if backend is None:
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        return
    with user_attrs_transaction(backend, trial, attrs):
        pass


@contextmanager
def user_attrs_transaction(
    backend: RDBStorage, trial: optuna.Trial, attrs: Mapping[str, object]
) -> Iterator[Session]:
    """An open transaction that has written ``attrs`` on the running ``trial`` (Optuna's own
    per-attribute upsert and state check) and commits when the block ends, so a caller can
    read in the same round (``claim``)."""
    with attrs_session(backend) as session:
        for key, value in attrs.items():
            set_user_attr_in(session, backend, trial_id(trial), key, value)
        yield session


def fail_running(study: optuna.Study, trial: FrozenTrial, reason: str) -> None:
    """Fail a RUNNING trial this process will not finish, recording why (as every FAIL does)."""
    study_storage(study).set_trial_user_attr(trial_id(trial), FAIL_REASON_ATTR, reason)
    study.tell(trial.number, state=TrialState.FAIL)


def fail_trials_of_worker(
    study: optuna.Study, worker: str, reason: str, max_retry: int
) -> list[int]:
    """Fail the RUNNING trials ``worker`` claimed, recording ``reason``, and queue their retries
    (as a heartbeat sweep would); returns their numbers. A trial that ended meanwhile (another
    worker's sweep) is left as it is."""
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if trial.user_attrs.get(WORKER_ATTR) != worker:
            continue
        with trial_start_lock(study):  # no trial starts between the failure and its retry
            try:
                fail_running(study, trial, reason)
            except (optuna.exceptions.UpdateFinishedTrialError, ValueError, RuntimeError):
                continue  # finished meanwhile
            requeue(study, find_trial(study, trial.number), max_retry)
        failed.append(trial.number)
    return failed
