"""Each piece of Optuna's private surface that hpo uses (all in
hpo/study/storage/_optuna_private.py) is still there and behaves as assumed. An Optuna release
that renames a private name, changes a signature or a table column, or stops answering through
the hook, fails here by name, rather than hpo falling back silently to slower or different
behaviour.

No version checks and no skips: run it against the pinned Optuna and the newest one
(``pip install -U optuna`` in a scratch environment, then this file).
"""

from __future__ import annotations

import inspect
import re
import time
import warnings

import optuna
import pytest
import sqlalchemy as sa
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from hpo.spec import HeartbeatSpec
from hpo.study.storage import _optuna_private as private
from hpo.study.storage import get_storage
from tests.support import REPO

HPO = REPO / "hpo"


def heartbeat_storage(url: str):
    return get_storage(url, HeartbeatSpec(interval=1, grace_period=2, max_retry=0))


def test_the_tables_hpo_writes_have_the_columns_and_unique_keys_it_uses():
    """_heartbeat.py upserts ON CONFLICT (trial_id) and (trial_id, key); _census.py groups by
    state and number; _heartbeat.py fails a trial by state and datetime_complete, and reads
    datetime_start."""

    def columns(model) -> set[str]:
        return set(model.__table__.columns.keys())

    def unique_keys(model) -> set[tuple[str, ...]]:
        return {
            tuple(c.name for c in constraint.columns)
            for constraint in model.__table__.constraints
            if isinstance(constraint, sa.UniqueConstraint)
        }

    assert {
        "trial_id",
        "study_id",
        "number",
        "state",
        "datetime_start",
        "datetime_complete",
    } <= columns(private.TrialModel)
    assert {"trial_id", "heartbeat"} <= columns(private.TrialHeartbeatModel)
    assert ("trial_id",) in unique_keys(private.TrialHeartbeatModel)
    assert {"trial_id", "key", "value_json"} <= columns(private.TrialUserAttributeModel)
    assert ("trial_id", "key") in unique_keys(private.TrialUserAttributeModel)
    assert {"trial_id", "key", "value_json"} <= columns(private.TrialSystemAttributeModel)
    assert private.TrialModel.__table__.c.state.type.enum_class is TrialState


def test_the_ids_and_the_storage_agree_with_optunas_public_lookups(storage_url, study_name):
    study = optuna.create_study(study_name=study_name, storage=get_storage(storage_url))
    trial = study.ask()
    storage = private.study_storage(study)
    assert storage is trial.storage, "the storage Optuna hands each trial publicly"
    assert private.study_id(study) == storage.get_study_id_from_name(study_name)
    frozen = study.trials[0]
    assert (
        private.trial_id(trial)
        == private.trial_id(frozen)
        == storage.get_trial_id_from_study_id_trial_number(private.study_id(study), trial.number)
    )


def test_the_rdb_storage_is_found_under_optunas_cache_wrapper(sqlite_url, study_name):
    """rdb_backend() falls back to "no SQL" (the gRPC path) when it finds no RDBStorage: a
    renamed ``_backend`` must fail here, not make every query slow."""
    rdb = get_storage(sqlite_url)
    wrapped = private.cached(rdb)
    assert wrapped is not rdb and private.uncached(wrapped) is rdb
    assert private.uncached(rdb) is rdb
    study = optuna.create_study(study_name=study_name, storage=rdb)
    assert isinstance(private.uncached(private.study_storage(study)), RDBStorage)


def test_several_attributes_are_written_in_one_session_and_a_finished_trial_refuses_them(
    storage_url, study_name
):
    assert list(inspect.signature(RDBStorage._set_trial_attr_without_commit).parameters) == [
        "self",
        "session",
        "model_cls",
        "trial_id",
        "key",
        "value",
    ]
    study = optuna.create_study(study_name=study_name, storage=get_storage(storage_url))
    trial = study.ask()
    backend = private.uncached(private.study_storage(study))
    commits = []
    count = lambda connection: commits.append(connection)  # noqa: E731
    sa.event.listen(backend.engine, "commit", count)
    try:
        with private.attrs_session(backend) as session:
            for key, value in {"worker": "w0", "progress": {"epoch": 1}}.items():
                private.set_user_attr_in(session, backend, private.trial_id(trial), key, value)
    finally:
        sa.event.remove(backend.engine, "commit", count)
    assert len(commits) == 1, "both attributes in one commit"
    assert study.trials[0].user_attrs == {"worker": "w0", "progress": {"epoch": 1}}
    study.tell(trial, 1.0)
    with pytest.raises(UpdateFinishedTrialError), private.attrs_session(backend) as session:
        private.set_user_attr_in(session, backend, private.trial_id(trial), "late", 1)


def test_the_attribute_session_ignores_a_lost_insert_race_and_rolls_back_other_errors(
    sqlite_url, study_name
):
    study = optuna.create_study(study_name=study_name, storage=get_storage(sqlite_url))
    trial_id = private.trial_id(study.ask())
    backend = private.uncached(private.study_storage(study))
    attrs = private.TrialUserAttributeModel
    with private.attrs_session(backend) as session:
        session.execute(sa.insert(attrs).values(trial_id=trial_id, key="k", value_json='"a"'))
    with private.attrs_session(
        backend
    ) as session:  # the same (trial_id, key) again: another writer won
        session.execute(sa.insert(attrs).values(trial_id=trial_id, key="k", value_json='"b"'))
    assert study.trials[0].user_attrs == {"k": "a"}
    with pytest.raises(RuntimeError), private.attrs_session(backend) as session:
        session.execute(sa.insert(attrs).values(trial_id=trial_id, key="other", value_json='"c"'))
        raise RuntimeError("interrupted")
    assert study.trials[0].user_attrs == {"k": "a"}, "rolled back"


@pytest.mark.slow
def test_optunas_own_stale_trial_question_is_answered_by_hpos_query(
    storage_url, study_name, monkeypatch
):
    """fail_stale_trials (and study.optimize, a dashboard) ask the private abstract
    BaseHeartbeat._get_stale_trial_ids; hpo's storage answers it with stale_trial_ids."""
    from optuna.storages._heartbeat import BaseHeartbeat

    assert "_get_stale_trial_ids" in BaseHeartbeat.__abstractmethods__
    assert list(inspect.signature(BaseHeartbeat._get_stale_trial_ids).parameters) == [
        "self",
        "study_id",
    ]
    storage = heartbeat_storage(storage_url)
    asked = []
    answer = type(storage).stale_trial_ids

    def counted(self, study_id):
        asked.append(study_id)
        return answer(self, study_id)

    study = optuna.create_study(study_name=study_name, storage=storage)
    trial = study.ask()
    storage.record_heartbeat(private.trial_id(trial))
    time.sleep(3.2)  # past the 2 s grace period, by more than SQLite's whole-second clock
    monkeypatch.setattr(type(storage), "stale_trial_ids", counted)
    optuna.storages.fail_stale_trials(study)
    assert asked == [private.study_id(study)], "Optuna asked through the hook"
    assert study.trials[0].state == TrialState.FAIL


def test_the_heartbeat_storage_attributes_hpo_reads_are_there(sqlite_url):
    storage = heartbeat_storage(sqlite_url)
    assert (storage.heartbeat_interval, storage.grace_period) == (1, 2)
    assert isinstance(storage.engine, sa.Engine) and callable(storage.scoped_session)


def test_the_heartbeat_reminder_is_the_text_optuna_warns_with_and_only_it_is_quieted(
    sqlite_url, study_name
):
    study = optuna.create_study(study_name=study_name, storage=heartbeat_storage(sqlite_url))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        study.ask()
    assert [w for w in seen if private.HEARTBEAT_REMINDER in str(w.message)], (
        "Optuna changed its reminder"
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        private.quiet_heartbeat_reminder()
        study.ask()
        warnings.warn("another warning", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["another warning"]


PRIVATE_USE = re.compile(
    r"optuna(\.\w+)*\._\w+|(?<!hpo\.study)\._(storage|study_id|trial_id|backend)\b|"
    r"_get_stale_trial_ids|_create_scoped_session|_set_trial_attr_without_commit|"
    r"storages\.get_storage\b|Heartbeat of storage"
)


def test_nothing_else_in_hpo_touches_optunas_private_surface():
    offenders = [
        f"{path.relative_to(HPO.parent)}:{number}: {line.strip()}"
        for path in sorted(HPO.rglob("*.py"))
        if path.name != "_optuna_private.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if PRIVATE_USE.search(line)
    ]
    assert offenders == [], (
        "use hpo.study.storage._optuna_private (and say why there):\n" + "\n".join(offenders)
    )


def test_trial_start_and_end_are_stored_in_naive_utc(sqlite_url, study_name, monkeypatch):
    """_heartbeat.py reads datetime_start and writes datetime_complete in the trials table as
    Optuna 5 keeps them: naive UTC (Optuna 4 wrote local time). On a host ahead of UTC, so
    that local time would show."""
    from datetime import datetime, timezone

    from hpo.study.storage import get_storage
    from hpo.study.storage._heartbeat import _fail_with_reason

    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+5:30
    time.tzset()
    try:
        storage = get_storage(sqlite_url)
        study = optuna.create_study(study_name=study_name, storage=storage)
        trial = study.ask()
        backend = private.uncached(storage)
        assert _fail_with_reason(backend, trial._trial_id, "a test")
        table = private.TrialModel.__table__
        with backend.engine.connect() as connection:
            start, end = connection.execute(
                sa.select(table.c.datetime_start, table.c.datetime_complete).where(
                    table.c.trial_id == trial._trial_id
                )
            ).one()
        utc_now = datetime.now(timezone.utc).replace(tzinfo=None)
        for stored in (start, end):
            assert stored.tzinfo is None and abs((utc_now - stored).total_seconds()) < 60
        assert abs((study.trials[0].datetime_complete - datetime.now()).total_seconds()) < 60
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
