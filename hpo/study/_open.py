"""Opening a spec's study (created once, with the spec recorded) and loading existing ones."""

from __future__ import annotations

import hashlib
import json
import time
import uuid

import optuna
import sqlalchemy as sa

from hpo.attributes import (
    FINGERPRINT_ATTR,
    METRIC_ATTR,
    N_TRIALS_ATTR,
    SPEC_FILE_ATTR,
    TASK_ATTR,
    UID_ATTR,
    WORKER_STARTS_ATTR,
)
from hpo.errors import DataError, UsageError
from hpo.spec import StudySpec
from hpo.study.records._census import trial_census
from hpo.study.records._find import (
    record_spec,
    recorded_document,
    sqlite_file_exists,
    study_uid,
)
from hpo.study.records._notes import write_study_note
from hpo.study.records._trials import enqueue
from hpo.study.search._factory import make_pruner, make_sampler
from hpo.study.search._strategy import start_plan
from hpo.study.storage._connect import database_problem, get_storage, holds_studies
from hpo.study.storage._optuna_private import study_id, study_storage
from hpo.study.storage._start_lock import trial_start_lock

# in the fingerprint: the unit of every intermediate value's step (pruner.units_per_epoch);
# trials reported in other units would be compared at the wrong rungs
PRUNER_UNIT = "pruner_units_per_epoch"
# in the fingerprint: the searched parameters, to name those that changed (the hash decides)
PARAMETERS = "parameters"
SPEC_CHANGE_FIX = "use another study name, or pass --allow-spec-change to change it on purpose"
# how long a process that finds a study without a uid waits for its creator to record one
UID_WAIT_SECONDS = 3.0
_UID_POLL_SECONDS = 0.1


def open_study(
    spec: StudySpec,
    worker: str = "",
    allow_spec_change: bool = False,
    adopt_spec: bool = True,
    note: bool = True,
) -> optuna.Study:
    """The spec's study on its storage, created (with the spec's settings, its fingerprint
    and a random uid recorded) if it does not exist. Sampler and pruner are built before
    anything touches the database, so a bad option leaves no half-created study behind.

    A study opened with a spec whose fingerprint differs from the recorded one is refused
    (its trials would not be comparable), unless ``allow_spec_change`` records the new one.
    ``adopt_spec=False`` (``hpo enqueue``) never changes an existing study's recorded spec:
    with ``allow_spec_change`` a differing spec is let through and nothing is recorded.
    ``note=False`` leaves the dashboard's study note to the caller (``write_study_note``):
    ``hpo tune`` writes it once its workers have gone, as optuna-dashboard takes ~1 s to import."""
    sampler, pruner = make_sampler(spec, worker), make_pruner(spec)
    fingerprint = spec_fingerprint(spec)
    storage = get_storage(spec.storage, spec.heartbeat)
    try:
        study, created = _create_or_load(spec, storage, sampler, pruner, fingerprint)
    except sa.exc.SQLAlchemyError as exc:
        raise UsageError(database_problem(spec.storage, exc)) from None
    recorded_document(study)  # an edited record: one line, before anything reads or writes
    _check_direction(study, spec)
    if not allow_spec_change:
        _refuse_differences(study, spec, fingerprint, SPEC_CHANGE_FIX)
    if worker and spec.sampler.seed is not None:
        # a resumed study, or a second `hpo tune` on it, must not replay this worker's samples
        study.sampler = make_sampler(spec, worker, start=_count_start(study, worker))
    if created or adopt_spec:
        recorded = study.user_attrs.get(FINGERPRINT_ATTR)
        if not recorded or _differences(recorded, fingerprint):
            study.set_user_attr(FINGERPRINT_ATTR, fingerprint)
        record_spec(study, spec)
        for key, value in {
            TASK_ATTR: spec.task,
            METRIC_ATTR: spec.metric,
            N_TRIALS_ATTR: spec.n_trials,
            SPEC_FILE_ATTR: spec.source,
        }.items():
            if study.user_attrs.get(key) != value:
                study.set_user_attr(key, value)
        if note:
            write_study_note(study, spec)  # the dashboard's study note: the spec, budget, units
    return study


def finished_study(spec: StudySpec, allow_spec_change: bool = False) -> optuna.Study | None:
    """The spec's study, opened, when it already holds ``n_trials`` finished trials and runs
    none: ``hpo tune`` then says it is done, skipping its minutes of checks and worker starts.
    None when the study does not exist or has trials left; a changed spec is refused (or
    recorded) as ``open_study`` does."""
    if not sqlite_file_exists(spec.storage):
        return None
    try:
        study = optuna.load_study(study_name=spec.name, storage=get_storage(spec.storage))
        census = trial_census(study)
    except (KeyError, sa.exc.SQLAlchemyError):  # none yet, or the checks will name the problem
        return None
    if census["finished"] < spec.n_trials or census["running"]:
        return None
    return open_study(spec, allow_spec_change=allow_spec_change)


def existing_spec_change(spec: StudySpec, allow_spec_change: bool = False) -> str | None:
    """What ``open_study`` would find of the spec's study where one of its name exists, found
    without creating anything (``hpo validate``): the same one-line refusal of another direction
    or, unless ``allow_spec_change``, of another spec; with it, how the spec differs (None: no
    such study, or the same spec)."""
    if not holds_studies(spec.storage):
        return None
    try:
        study = optuna.load_study(study_name=spec.name, storage=get_storage(spec.storage))
    except KeyError:
        return None
    _check_direction(study, spec)
    fingerprint = spec_fingerprint(spec)
    if not allow_spec_change:
        _refuse_differences(study, spec, fingerprint, SPEC_CHANGE_FIX)
        return None
    recorded = study.user_attrs.get(FINGERPRINT_ATTR)
    differing = _differences(recorded, fingerprint) if recorded else []
    return "; ".join(_shown(key, recorded, fingerprint) for key in differing) or None


def _check_direction(study: optuna.Study, spec: StudySpec) -> None:
    if study.direction.name.lower() != spec.direction:
        raise UsageError(
            f"study {spec.name!r} already exists with direction {study.direction.name.lower()}, "
            f"but the spec says {spec.direction}; rename the study or fix the direction"
        )


def check_spec(study: optuna.Study, spec: StudySpec, fix: str) -> None:
    """Refuse ``spec`` for ``study`` in one line naming each key (task, metric, search space,
    pruner unit, data) whose fingerprint differs from the one the study recorded; ``fix``
    says what to do. The check ``hpo tune`` and workers make, for the commands that follow."""
    _refuse_differences(study, spec, spec_fingerprint(spec), fix)


def _refuse_differences(
    study: optuna.Study, spec: StudySpec, fingerprint: dict[str, object], fix: str
) -> None:
    recorded = study.user_attrs.get(FINGERPRINT_ATTR)
    if recorded and (differing := _differences(recorded, fingerprint)):
        shown = "; ".join(_shown(key, recorded, fingerprint) for key in differing)
        raise UsageError(f"study {spec.name!r} was created from another spec ({shown}); {fix}")


def spec_fingerprint(spec: StudySpec) -> dict[str, object]:
    """What makes two specs' trials comparable: task, metric, search space, the pruner's unit
    and the data's bytes (not its path: each machine may keep the data elsewhere). Not the
    budget (n_trials, timeout) nor how the trials run: raising n_trials resumes the search."""
    from hpo.data import files_fingerprint

    parameters = {name: _param_record(param) for name, param in spec.search_space.items()}
    space = json.dumps(parameters, sort_keys=True)
    try:
        data = files_fingerprint(spec.data_dir)[:12]
    except DataError:  # no data here: this process cannot run a trial, and says so when it tries
        data = None
    return {
        "task": spec.task,
        "metric": spec.metric,
        "search_space": hashlib.sha256(space.encode()).hexdigest()[:12],
        "data": data,
        PRUNER_UNIT: spec.pruner.units_per_epoch,
        PARAMETERS: parameters,
    }


def _param_record(param) -> dict[str, object]:
    record = param.model_dump(mode="json")
    if record.get("when") is None:
        del record[
            "when"
        ]  # unconditional parameters keep the fingerprints studies were created with
    return record


def _differences(recorded: dict, fingerprint: dict) -> list[str]:
    return [
        key
        for key, value in fingerprint.items()
        if key != PARAMETERS
        and recorded.get(key) != value
        and not (key == "data" and None in (value, recorded.get(key)))
    ]


def _shown(key: str, recorded: dict, fingerprint: dict) -> str:
    """A differing fingerprint key in words; the search space parameter by parameter."""
    if key == "search_space":
        return f"search_space: {_space_changes(recorded[PARAMETERS], fingerprint[PARAMETERS])}"
    if key == "data":  # a hash of the files' bytes: the same posts saved with CRLF differ too
        return (
            f"data: the files differ from those the study was tuned on "
            f"({recorded.get(key)!r} in the study, {fingerprint[key]!r} here)"
        )
    return f"{key}: {recorded.get(key)!r} in the study, {fingerprint[key]!r} here"


def _space_changes(before: dict[str, dict], now: dict[str, dict]) -> str:
    """Parameters added, removed, and searched differently (each differing setting)."""
    added = [name for name in now if name not in before]
    removed = [name for name in before if name not in now]
    changed = [
        f"{name}'s {field} {before[name].get(field)!r} in the study, {now[name].get(field)!r} here"
        for name in now
        if name in before
        for field in dict.fromkeys([*now[name], *before[name]])
        if before[name].get(field) != now[name].get(field)
    ]
    return "; ".join(
        [
            *([f"{', '.join(added)} added"] if added else []),
            *([f"{', '.join(removed)} removed"] if removed else []),
            *changed,
        ]
    )


def _create_or_load(
    spec: StudySpec,
    storage: optuna.storages.BaseStorage,
    sampler: optuna.samplers.BaseSampler,
    pruner: optuna.pruners.BasePruner,
    fingerprint: dict[str, object],
) -> tuple[optuna.Study, bool]:
    """The spec's study, and whether this call created it. The process that creates it
    records its fingerprint, queues the spec's warm start, then records its uid (an opener
    waits for the uid, so it finds both). Only the creator queues: N workers starting at
    once still queue each set once."""
    try:
        study = optuna.create_study(
            study_name=spec.name,
            storage=storage,
            sampler=sampler,
            pruner=pruner,
            direction=spec.direction,
        )
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(
            study_name=spec.name, storage=storage, sampler=sampler, pruner=pruner
        )
        _await_uid(study)
        return study, False
    study.set_user_attr(FINGERPRINT_ATTR, fingerprint)
    for point in spec.warm_start:
        enqueue(study, spec, point)
    if spec.sampler.name == "auto":  # its portfolio runs right after the warm start
        start_plan(study, spec)
    study.set_user_attr(UID_ATTR, uuid.uuid4().hex)
    # the dashboard's charts name the objective, not "Objective 0"
    study.set_metric_names([spec.metric])
    return study, True


def _count_start(study: optuna.Study, worker: str) -> int:
    """How many times a worker named ``worker`` opened ``study`` before this one, counted and
    recorded under the trial-start lock, so that two started at once count differently (the
    gRPC proxy has no lock: two there may still count alike)."""
    storage = study_storage(study)
    with trial_start_lock(study):
        starts = storage.get_study_system_attrs(study_id(study)).get(WORKER_STARTS_ATTR, {})
        start = int(starts.get(worker, 0))
        storage.set_study_system_attr(
            study_id(study), WORKER_STARTS_ATTR, {**starts, worker: start + 1}
        )
    return start


def _await_uid(study: optuna.Study) -> None:
    """Wait briefly for the creator of ``study`` to record its uid; a study made by Optuna
    itself (its CLI or API) never gets one that way, so then record one here.

    Two processes that give up waiting at the same moment may both record one; the
    second write wins, and the pause after writing lets it land before either caller
    reads the uid back (``study_uid``), so they agree.
    """
    deadline = time.monotonic() + UID_WAIT_SECONDS
    while study_uid(study) is None:
        if time.monotonic() >= deadline:
            study.set_user_attr(UID_ATTR, uuid.uuid4().hex)
            # lets a simultaneous writer land before anyone reads the uid
            time.sleep(UID_WAIT_SECONDS / 10)
            return
        time.sleep(_UID_POLL_SECONDS)


def study_exists(study: optuna.Study) -> bool:
    """False once the study was deleted from its storage (``optuna delete-study``)."""
    try:
        # the storage's own lookup: one query
        study_storage(study).get_study_id_from_name(study.study_name)
    except KeyError:
        return False
    return True
