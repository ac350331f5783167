"""Storage, sampler, pruner and study, on real SQLite and PostgreSQL storages (no training:
trials are built with ask/tell and fake intermediate reports)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
from optuna.distributions import FloatDistribution
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from hpo.errors import UsageError
from hpo.spec import HeartbeatSpec, SpecError, StudySpec, load_spec
from hpo.storage_url import redact
from hpo.study import open_study, spec_fingerprint
from hpo.study.records import (
    TrialCounts,
    claim,
    enqueue,
    load_existing_study,
    recorded_spec,
    set_user_attrs,
    state_counts,
    study_uid,
    trial_census,
)
from hpo.study.search import suggest
from hpo.study.storage import first_heartbeat, get_storage
from tests.support.conditional_space import conditional_spec
from tests.support.shared_storage import read_study
from tests.support.study_files import SMOKE, smoke_spec

pytestmark = pytest.mark.filterwarnings(
    "ignore:Heartbeat of storage is supposed to be used with Study.optimize"
)
X = {"x": FloatDistribution(0.0, 1.0)}


def study_names(url: str) -> list[str]:
    return [s.study_name for s in optuna.get_all_study_summaries(get_storage(url))]


def one_line_usage_error(url: str, secret: str | None = None) -> str:
    with pytest.raises(UsageError) as caught:
        get_storage(url)
    message = str(caught.value)
    assert caught.value.exit_code == 2
    assert "\n" not in message
    if secret:
        assert secret not in message
    return message


# ---- storage --------------------------------------------------------------------------------


def test_worker_storage_is_rdb_with_heartbeats_and_retry_on_both_backends(storage_url, study_name):
    storage = get_storage(storage_url, HeartbeatSpec(interval=7, grace_period=21, max_retry=2))
    assert isinstance(storage, RDBStorage)
    assert storage.get_heartbeat_interval() == 7
    assert isinstance(
        storage.get_heartbeat_stale_trial_callback(), RetryHeartbeatStaleTrialCallback
    )
    study = optuna.create_study(study_name=study_name, storage=storage, direction="maximize")
    study.tell(study.ask(X), 0.5)
    assert study_name in study_names(storage_url)
    assert read_study(study_name, storage_url).best_value == 0.5


def test_set_user_attrs_records_them_all_in_one_commit(storage_url, study_name):
    study = optuna.create_study(
        study_name=study_name, storage=get_storage(storage_url), direction="maximize"
    )
    trial = study.ask(X)
    trial.set_user_attr("worker", "node/0")
    commits = []

    def count(connection):
        commits.append(connection)

    sa.event.listen(sa.engine.Engine, "commit", count)
    try:
        set_user_attrs(
            trial, {"metrics": {"macro_f1": 0.5}, "epochs_run": 3, "worker": "node/1", "seed": 7}
        )
    finally:
        sa.event.remove(sa.engine.Engine, "commit", count)
    assert len(commits) == 1
    study.tell(trial, 0.5)
    reread = read_study(study_name, storage_url).trials[0].user_attrs
    assert reread == {"metrics": {"macro_f1": 0.5}, "epochs_run": 3, "worker": "node/1", "seed": 7}


def test_set_user_attrs_refuses_a_finished_trial_and_writes_nothing(storage_url, study_name):
    study = optuna.create_study(
        study_name=study_name, storage=get_storage(storage_url), direction="maximize"
    )
    trial = study.ask(X)
    study.tell(trial, 0.5)
    with pytest.raises(RuntimeError, match="finished"):
        set_user_attrs(trial, {"a": 1, "b": 2})
    assert study.trials[0].user_attrs == {}


def test_claim_records_the_worker_and_counts_earlier_trials_in_one_commit(storage_url, study_name):
    study = optuna.create_study(
        study_name=study_name, storage=get_storage(storage_url), direction="maximize"
    )
    study.tell(study.ask(X), 0.1)
    running_before = study.ask(X)
    # a re-queued retry keeps its attributes
    study.enqueue_trial({"x": 0.5}, user_attrs={"worker": "node/1"})
    trial = study.ask(X)  # takes the queued one: nothing is waiting now
    study.ask(X)  # started after it: not "before"
    commits = []

    def count(connection):
        commits.append(connection)

    sa.event.listen(sa.engine.Engine, "commit", count)
    try:
        census = claim(trial, {"worker": "node/3"})
    finally:
        sa.event.remove(sa.engine.Engine, "commit", count)
    assert len(commits) == 1
    assert (census["complete"], census["running"], census["running_before"], census["waiting"]) == (
        1,
        3,
        1,
        0,
    )
    assert census == trial_census(study, before=trial.number)
    assert running_before.number < trial.number
    assert study.trials[trial.number].user_attrs == {"worker": "node/3"}


def beat_of(storage: RDBStorage, trial_id: int):
    with storage.engine.connect() as connection:
        return connection.execute(
            sa.text("SELECT heartbeat FROM trial_heartbeats WHERE trial_id = :t"), {"t": trial_id}
        ).scalar()


@pytest.mark.slow
def test_heartbeats_are_written_at_once_and_stale_trials_found_as_optuna_finds_them(
    storage_url, study_name
):
    storage = get_storage(storage_url, HeartbeatSpec(interval=1, grace_period=2, max_retry=0))
    study = optuna.create_study(study_name=study_name, storage=storage, direction="maximize")
    alive, dead, silent = study.ask(X), study.ask(X), study.ask(X)
    first_heartbeat(alive)
    first = beat_of(storage, alive._trial_id)
    first_heartbeat(dead)
    assert first is not None and beat_of(storage, silent._trial_id) is None
    time.sleep(3.2)  # past the grace period, by over a second: SQLite's clock counts whole seconds
    storage.record_heartbeat(alive._trial_id)
    assert beat_of(storage, alive._trial_id) > first
    stale = storage._get_stale_trial_ids(study._study_id)
    assert stale == [dead._trial_id], (
        "only the trial whose beat stopped; one never beaten is not judged"
    )
    assert stale == RDBStorage._get_stale_trial_ids(storage, study._study_id), (
        "Optuna's own check agrees"
    )


@pytest.mark.postgres
def test_a_pooled_connection_is_checked_only_after_sitting_idle_and_replaced_when_dead(
    postgres_url, monkeypatch
):
    storage = get_storage(postgres_url)
    pings = []
    real_ping = type(storage.engine.dialect).do_ping

    def counting_ping(dialect, connection):
        pings.append(connection)
        return real_ping(dialect, connection)

    storage.engine.dialect.do_ping = counting_ping.__get__(storage.engine.dialect)
    # The idle limit is set, not waited for: a loaded machine's stall inside the burst
    # would otherwise count as idleness (it did, in CI).
    monkeypatch.setattr("hpo.study.storage._connect.PING_AFTER_IDLE_SECONDS", 3600.0)
    for _ in range(20):  # a trial's burst of storage calls: live connections go unchecked
        storage.get_all_studies()
    # only those the pool held before the check was installed, of unknown age: once each
    assert len(pings) == len({id(connection) for connection in pings}) <= 2, pings
    pinged = len(pings)
    for _ in range(20):
        storage.get_all_studies()
    assert len(pings) == pinged, "a connection just handed back is not pinged"
    with storage.engine.connect() as connection:
        backend_pid = connection.execute(sa.text("SELECT pg_backend_pid()")).scalar()
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:  # what a database restart does to the pooled connection
        connection.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": backend_pid})
    admin.dispose()
    # idle, as in training
    monkeypatch.setattr("hpo.study.storage._connect.PING_AFTER_IDLE_SECONDS", 0.0)
    storage.get_all_studies()  # checked, found dead, replaced: no error
    assert pings, "an idle connection is checked before use"
    with storage.engine.connect() as connection:
        assert connection.execute(sa.text("SELECT pg_backend_pid()")).scalar() != backend_pid


def _ask_each_round(url: str, names: list[str], barrier, answers) -> None:
    """One worker process: in every round, all ask the same study at the same moment."""
    from hpo.study.storage import get_storage

    storage = get_storage(url)
    for name in names:
        study = optuna.load_study(study_name=name, storage=storage)
        barrier.wait()
        answers.put((name, study.ask().number))


@pytest.mark.slow
def test_a_waiting_trial_is_handed_to_one_worker_only(storage_url):
    """A warm start or a re-queued trial is WAITING; workers asking at once (they start
    together) must not both run it. On SQLite the sqlite3 module began a transaction only at
    its first write, so two workers both read it as WAITING and both ran it (about two rounds
    in five with four workers, before every transaction took the write lock at its start)."""
    import multiprocessing

    workers, names = 4, [f"waiting-{uuid.uuid4().hex[:8]}" for _ in range(10)]
    for name in names:
        optuna.create_study(study_name=name, storage=storage_url).enqueue_trial({"x": 1.0})
    context = multiprocessing.get_context("spawn")
    barrier, answers = context.Barrier(workers), context.Queue()
    processes = [
        context.Process(target=_ask_each_round, args=(storage_url, names, barrier, answers))
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    got = [answers.get(timeout=120) for _ in range(workers * len(names))]
    for process in processes:
        process.join(timeout=60)
    for name in names:
        numbers = sorted(number for study, number in got if study == name)
        assert numbers == list(range(workers)), f"{name}: trials handed out {numbers}"


def test_read_only_storage_has_no_heartbeat(storage_url):
    storage = get_storage(storage_url)
    assert isinstance(storage, RDBStorage)
    assert storage.get_heartbeat_interval() is None


def test_open_study_uses_the_specs_heartbeat(storage_url, study_name):
    spec = smoke_spec(
        "heartbeat={interval: 5, grace_period: 20}", storage=storage_url, name=study_name
    )
    assert open_study(spec)._storage.get_heartbeat_interval() == 5


def test_bare_postgresql_url_works_with_the_shipped_driver(postgres_url, study_name):
    bare = (
        sa.make_url(postgres_url).set(drivername="postgresql").render_as_string(hide_password=False)
    )
    optuna.create_study(study_name=study_name, storage=get_storage(bare))
    assert study_name in study_names(postgres_url)


def test_sqlite_parent_directories_are_created(tmp_path: Path, study_name):
    db = tmp_path / "a" / "b" / "hpo.db"
    optuna.create_study(study_name=study_name, storage=get_storage(f"sqlite:///{db}"))
    assert db.is_file()


def test_sqlite_path_that_cannot_be_created_is_a_usage_error(tmp_path: Path):
    (tmp_path / "file").write_text("not a directory")
    message = one_line_usage_error(f"sqlite:///{tmp_path / 'file' / 'sub' / 'hpo.db'}")
    assert "cannot create" in message and str(tmp_path / "file" / "sub") in message


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql://hpo:s3cret@db:5432/hpo", "postgresql://hpo:***@db:5432/hpo"),
        ("postgresql+psycopg2://hpo:s3cret@db/hpo", "postgresql+psycopg2://hpo:***@db/hpo"),
        ("grpc://hpo:s3cret@proxy:13000", "grpc://hpo:***@proxy:13000"),
        ("postgresql://hpo:s3cret@db:notaport/hpo", "postgresql://hpo:***@db:notaport/hpo"),
        ("postgresql://hpo@db:5432/hpo", "postgresql://hpo@db:5432/hpo"),
        ("sqlite:///_runs/hpo.db", "sqlite:///_runs/hpo.db"),
        ("grpc://proxy:13000", "grpc://proxy:13000"),
    ],
)
def test_redact_hides_only_the_password(url, masked):
    assert redact(url) == masked


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("nonsense", "is not valid"),
        ("mysql://hpo:s3cret@127.0.0.1/hpo", "only sqlite, postgresql and grpc"),
        ("redis://hpo:s3cret@127.0.0.1:6379/0", "only sqlite, postgresql and grpc"),
        ("postgresql://hpo:s3cret@127.0.0.1:notaport/hpo", "is not valid"),
        ("grpc://hpo:s3cret@proxy", "grpc://HOST:PORT"),
    ],
)
def test_bad_storage_urls_are_one_line_usage_errors_without_the_password(url, expected):
    assert expected in one_line_usage_error(url, secret="s3cret")


def test_unreachable_database_fails_fast_without_the_password():
    started = time.monotonic()
    message = one_line_usage_error("postgresql://postgres:s3cret@127.0.0.1:1/x", secret="s3cret")
    assert time.monotonic() - started < 10
    assert "cannot use the database at" in message and "127.0.0.1:1" in message
    assert "postgres:***@" in message


# The local server trusts 127.0.0.1 (pg_hba "trust"), so a wrong password is accepted and
# cannot be tested here; a missing database or role is refused by any server.
@pytest.mark.parametrize(
    ("user", "database", "expected"),
    [
        ("postgres", "no_such_db_xyz", 'database "no_such_db_xyz" does not exist'),
        ("no_such_role_xyz", "postgres", 'role "no_such_role_xyz" does not exist'),
    ],
)
def test_refused_connection_names_the_problem_without_the_password(
    postgres_url, user, database, expected
):
    url = sa.make_url(postgres_url).set(username=user, password="s3cret-pw", database=database)
    message = one_line_usage_error(url.render_as_string(hide_password=False), secret="s3cret-pw")
    assert expected in message


@pytest.fixture
def role_without_privileges(postgres_url):
    """A role that may log in and nothing else, dropped afterwards."""
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    role = f"hpo_noperm_{uuid.uuid4().hex[:8]}"
    with admin.connect() as connection:
        connection.execute(sa.text(f"CREATE ROLE {role} LOGIN"))
    try:
        yield (
            sa.make_url(postgres_url).set(username=role).render_as_string(hide_password=False),
            role,
        )
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP ROLE {role}"))
        admin.dispose()


@pytest.mark.postgres
@pytest.mark.slow
def test_a_role_without_privileges_is_one_line_naming_the_role_and_the_grant(
    postgres_url, role_without_privileges
):
    url, role = role_without_privileges
    get_storage(postgres_url)  # the tables exist (the postgres role created them)
    result = subprocess.run(
        [sys.executable, "-m", "hpo", "status", "any-study", "--storage", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr[
        -2000:
    ]
    assert f"role {role!r} may not use the study tables" in result.stderr
    assert f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}" in result.stderr


# ---- sampler and pruner ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("sampler.options.nonsense=1", "sampler.options"),
        ("pruner.options.nonsense=1", "pruner.options"),
    ],
)
def test_bad_options_are_spec_errors_and_create_no_study(storage_url, study_name, override, key):
    spec = smoke_spec(override, storage=storage_url, name=study_name)
    with pytest.raises(SpecError, match=key) as caught:
        open_study(spec)
    assert "nonsense" in str(caught.value) and "\n" not in str(caught.value)
    assert study_name not in study_names(storage_url)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "sampler.options.n_startup_trials=abc",
            "sampler.options.n_startup_trials: expected an integer, got 'abc'",
        ),
        (
            "sampler.options.multivariate=3",
            "sampler.options.multivariate: expected true or false, got 3",
        ),
        (
            "sampler.options.prior_weight=heavy",
            "sampler.options.prior_weight: expected a number, got 'heavy'",
        ),
        (
            "pruner.options.reduction_factor=abc",
            "pruner.options.reduction_factor: expected an integer, got 'abc'",
        ),
        (
            "pruner.options={patience: 1, wrapped: {name: median, options: {n_startup_trials: x}}}",
            "pruner.options.wrapped.options.n_startup_trials: expected an integer, got 'x'",
        ),
    ],
)
def test_an_option_of_the_wrong_type_names_the_option_and_the_type_wanted(
    storage_url, study_name, override, expected
):
    spec = smoke_spec(
        override,
        *(["pruner.name=patient"] if "patience" in override else []),
        storage=storage_url,
        name=study_name,
    )
    with pytest.raises(SpecError) as caught:
        open_study(spec)
    assert expected in str(caught.value) and "\n" not in str(caught.value)
    assert study_name not in study_names(storage_url)


def seeded_spec(storage_url: str, name: str) -> StudySpec:
    """The smoke study with a seed, every trial random-sampled: the draws a seed decides."""
    return smoke_spec(
        "sampler.seed=7", "sampler.options={n_startup_trials: 10}", storage=storage_url, name=name
    )


def sampled(study: optuna.Study, spec: StudySpec, n: int) -> list[tuple]:
    """Ask and tell ``n`` trials (each told a made-up value): their parameter sets."""
    points = []
    for _ in range(n):
        trial = study.ask()
        params = suggest(trial, spec)
        study.tell(trial, params["learning_rate"])
        points.append(tuple(sorted(params.items())))
    return points


def test_a_resumed_study_samples_new_points(storage_url, study_name):
    """Tuned to 4 trials, then resumed to 8 with the same spec and worker name: the resumed
    worker's seed moved on, where it replayed trials 0-3's parameters exactly."""
    spec = seeded_spec(storage_url, study_name)
    first = sampled(open_study(spec, worker="vm/0"), spec, 4)
    resumed = sampled(open_study(spec, worker="vm/0"), spec, 4)
    assert len(set(first + resumed)) == 8, (first, resumed)


def test_two_workers_started_alike_sample_different_points(storage_url, study_name):
    """`hpo tune --workers 1` from two shells: two workers of one name on one study."""
    spec = seeded_spec(storage_url, study_name)
    one, two = open_study(spec, worker="vm/0"), open_study(spec, worker="vm/0")
    assert not set(sampled(one, spec, 3)) & set(sampled(two, spec, 3))


def test_a_fresh_studys_first_run_is_decided_by_the_specs_seed(storage_url, study_name):
    runs = []
    for name in (f"{study_name}-a", f"{study_name}-b"):
        spec = seeded_spec(storage_url, name)
        runs.append(sampled(open_study(spec, worker="vm/0"), spec, 3))
    assert runs[0] == runs[1]


def test_median_pruner_prunes_a_far_worse_trial_and_keeps_its_reports(storage_url, study_name):
    spec = smoke_spec(
        "pruner.name=median",
        "pruner.options={n_startup_trials: 1, n_warmup_steps: 0}",
        storage=storage_url,
        name=study_name,
    )
    study = open_study(spec)
    for final in (0.80, 0.85):
        trial = study.ask(X)
        for step, value in enumerate((final - 0.2, final - 0.1, final)):
            trial.report(value, step)
            assert not trial.should_prune()
        study.tell(trial, final)

    bad = study.ask(X)
    bad.report(0.05, 0)
    assert bad.should_prune()
    study.tell(bad, state=TrialState.PRUNED)

    frozen = study.get_trials(states=(TrialState.PRUNED,))
    assert [t.number for t in frozen] == [bad.number]
    assert frozen[0].intermediate_values == {0: 0.05}
    assert state_counts(study).pruned == 1


def test_none_pruner_never_prunes(storage_url, study_name):
    study = open_study(
        smoke_spec("pruner.name=none", "pruner.options={}", storage=storage_url, name=study_name)
    )
    good = study.ask(X)
    good.report(0.9, 0)
    study.tell(good, 0.9)
    bad = study.ask(X)
    bad.report(0.0, 0)
    assert not bad.should_prune()


# ---- studies -------------------------------------------------------------------------------------


def test_open_study_records_the_spec_and_is_idempotent(storage_url, study_name):
    spec = smoke_spec("n_trials=12", "train.epochs=2", storage=storage_url, name=study_name)
    study = open_study(spec)
    expected = {
        "task": "criteria",
        "metric": "macro_f1",
        "n_trials": 12,
        "spec_file": str(SMOKE),
        "uid": study_uid(study),
        "spec_fingerprint": spec_fingerprint(spec),
    }
    assert study.user_attrs == expected
    assert study.direction.name.lower() == "maximize"
    # the whole spec, --set flags and all, out of the dashboard's user attributes
    kept = recorded_spec(load_existing_study(study_name, storage_url), storage_url)
    assert kept.model_dump() == spec.model_dump()
    assert kept.source == f"study {study_name}"
    study.tell(study.ask(X), 0.7)

    again = open_study(spec, worker="host/1")
    assert again._study_id == study._study_id
    assert again.user_attrs == expected
    assert len(again.trials) == 1
    assert study_names(storage_url).count(study_name) == 1

    # n_trials is the budget, not the search: raising it resumes, with no --allow-spec-change
    rerun = open_study(
        smoke_spec("n_trials=20", "train.epochs=2", storage=storage_url, name=study_name)
    )
    assert rerun.user_attrs["n_trials"] == 20
    assert "n_trials" not in rerun.user_attrs["spec_fingerprint"]
    assert recorded_spec(rerun).n_trials == 20
    assert len(rerun.trials) == 1


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("search_space.learning_rate.high=0.01", "search_space"),
        ("metric=accuracy", "metric"),
    ],
)
def test_a_spec_that_differs_from_the_studys_is_refused_naming_the_keys(
    storage_url, study_name, override, key
):
    open_study(smoke_spec(storage=storage_url, name=study_name))
    with pytest.raises(UsageError) as caught:
        open_study(smoke_spec(override, storage=storage_url, name=study_name))
    message = str(caught.value)
    assert f"study {study_name!r} was created from another spec ({key}: " in message
    assert "--allow-spec-change" in message and "\n" not in message
    study = load_existing_study(study_name, storage_url)
    assert study.user_attrs["spec_fingerprint"] == spec_fingerprint(
        smoke_spec(storage=storage_url, name=study_name)
    )


def test_a_changed_search_space_is_refused_naming_each_parameter_that_differs(
    storage_url, study_name
):
    """Not two hashes: which parameters were added, removed, or searched differently."""
    open_study(
        smoke_spec(
            "search_space.weight_decay={type: float, low: 0.0, high: 0.1}",
            storage=storage_url,
            name=study_name,
        )
    )
    resumed = smoke_spec(
        "search_space.learning_rate.high=0.01",
        "search_space.encoder_dropout={type: float, low: 0, high: 0.2}",
        "search_space.pooling.choices=[cls]",
        storage=storage_url,
        name=study_name,
    )
    with pytest.raises(UsageError) as caught:
        open_study(resumed)
    message = str(caught.value)
    assert (
        "(search_space: encoder_dropout added; weight_decay removed; "
        "learning_rate's high 0.006 in the study, 0.01 here; "
        "pooling's choices ['cls', 'mean'] in the study, ['cls'] here)"
    ) in message, message
    assert "--allow-spec-change" in message and "\n" not in message


def test_the_data_is_part_of_the_fingerprint_by_content_not_path(tmp_path, storage_url, study_name):
    from hpo.fixtures import write_sample

    here, there, other = (
        write_sample(tmp_path / d, posts=20, seed=s) for d, s in (("a", 0), ("b", 0), ("c", 1))
    )
    open_study(smoke_spec(f"data_dir={here}", storage=storage_url, name=study_name))
    # same bytes elsewhere
    open_study(smoke_spec(f"data_dir={there}", storage=storage_url, name=study_name))
    with pytest.raises(UsageError, match="data: "):
        open_study(smoke_spec(f"data_dir={other}", storage=storage_url, name=study_name))


def test_a_created_study_gets_a_random_uid_that_every_opener_keeps(
    tmp_path, storage_url, study_name
):
    uid = study_uid(open_study(smoke_spec(storage=storage_url, name=study_name)))
    assert len(uid) == 32 and int(uid, 16) >= 0
    assert (
        study_uid(open_study(smoke_spec(storage=storage_url, name=study_name), worker="host/1"))
        == uid
    )
    elsewhere = open_study(
        smoke_spec(storage=f"sqlite:///{tmp_path / 'other.db'}", name=study_name)
    )
    assert study_uid(elsewhere) not in (None, uid), (
        "a same-named study on another storage is another study"
    )


def test_an_opener_waits_for_the_creator_to_record_the_uid(storage_url, study_name):
    created = optuna.create_study(
        study_name=study_name, storage=get_storage(storage_url), direction="maximize"
    )
    # between create and set
    creator = threading.Timer(0.5, created.set_user_attr, ("uid", "c0ffee" * 5 + "00"))
    creator.start()
    try:
        assert (
            study_uid(open_study(smoke_spec(storage=storage_url, name=study_name)))
            == "c0ffee" * 5 + "00"
        )
    finally:
        creator.join()


def test_a_study_made_without_a_uid_gets_one_when_opened(monkeypatch, storage_url, study_name):
    # Optuna's CLI made it: nobody else will record one
    monkeypatch.setattr("hpo.study._open.UID_WAIT_SECONDS", 0.3)
    optuna.create_study(
        study_name=study_name, storage=get_storage(storage_url), direction="maximize"
    )
    uid = study_uid(open_study(smoke_spec(storage=storage_url, name=study_name)))
    assert uid and len(uid) == 32
    assert study_uid(open_study(smoke_spec(storage=storage_url, name=study_name))) == uid


def test_open_study_rejects_a_direction_mismatch(storage_url, study_name):
    open_study(smoke_spec(storage=storage_url, name=study_name))
    with pytest.raises(UsageError, match="direction maximize.*spec says minimize"):
        open_study(smoke_spec("direction=minimize", storage=storage_url, name=study_name))


@pytest.mark.slow
def test_reading_a_study_needs_an_existing_one_and_creates_none(storage_url, study_name):
    with pytest.raises(UsageError, match=f"no study named '{study_name}'"):
        load_existing_study(smoke_spec(storage=storage_url, name=study_name).name, storage_url)
    assert study_name not in study_names(storage_url)


def test_state_counts_counts_every_state_and_gives_the_best_value(storage_url, study_name):
    study = optuna.create_study(
        study_name=study_name, storage=get_storage(storage_url), direction="maximize"
    )
    assert state_counts(study) == TrialCounts()
    for value in (0.6, 0.9, 0.7):
        study.tell(study.ask(X), value)
    for _ in range(2):
        study.tell(study.ask(X), state=TrialState.PRUNED)
    study.tell(study.ask(X), state=TrialState.FAIL)
    study.ask(X)  # left running
    study.ask(X)
    study.enqueue_trial({"x": 0.5})  # waiting: after the asks, or the next ask would take it

    counts = state_counts(study)
    assert counts == TrialCounts(
        complete=3, pruned=2, failed=1, running=2, waiting=1, best=pytest.approx(0.9)
    )
    assert counts.finished == 5


def test_load_existing_study_lists_the_studies_that_exist(storage_url, study_name):
    optuna.create_study(study_name=study_name, storage=get_storage(storage_url))
    optuna.create_study(study_name=f"{study_name}-2", storage=get_storage(storage_url))
    assert load_existing_study(study_name, storage_url).study_name == study_name
    with pytest.raises(UsageError) as caught:
        load_existing_study("no-such-study", storage_url)
    message = str(caught.value)
    assert "no study named 'no-such-study'" in message and "\n" not in message
    assert study_name in message and f"{study_name}-2" in message


def test_load_existing_study_on_an_empty_storage_says_none(sqlite_url):
    with pytest.raises(UsageError, match="studies there: none"):
        load_existing_study("missing", sqlite_url)


# ---- conditional spaces and warm starts ----------------------------------------------------------


def test_the_warm_start_runs_first_with_the_remaining_parameters_sampled(
    tmp_path, sqlite_url, study_name
):
    spec = load_spec(conditional_spec(tmp_path, sqlite_url, study_name), env={})
    study = open_study(spec)
    study.optimize(lambda trial: suggest(trial, spec)["learning_rate"], n_trials=3)
    first, second, _ = study.trials
    assert first.params == {"adapter": "full", "head_layers": 0, "learning_rate": 2e-5}
    assert {k: second.params[k] for k in ("adapter", "lora_r", "learning_rate")} == {
        "adapter": "lora",
        "lora_r": 8,
        "learning_rate": 3e-4,
    }
    assert "head_layers" in second.params  # left out of the warm start: sampled


def _run_conditional_worker(spec_path: str, storage: str, worker: str, start) -> None:
    from hpo.run.worker import run_worker

    spec = load_spec(spec_path, (), storage, env={})
    start.wait()  # every worker opens the study at the same moment
    run_worker(
        spec,
        worker=worker,
        poll_seconds=0.2,
        objective=lambda trial: suggest(trial, spec)["learning_rate"],
    )


@pytest.mark.postgres
@pytest.mark.slow
def test_the_warm_start_is_queued_once_however_many_workers_start_together(
    tmp_path, postgres_url, study_name
):
    import multiprocessing

    path = conditional_spec(tmp_path, postgres_url, study_name, n_trials=8)
    context = multiprocessing.get_context("spawn")  # fresh processes, as hpo tune starts them
    start = context.Barrier(4)
    workers = [
        context.Process(
            target=_run_conditional_worker, args=(str(path), postgres_url, f"w{i}", start)
        )
        for i in range(4)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=300)
    assert [p.exitcode for p in workers] == [0] * 4
    study = load_existing_study(study_name, postgres_url)
    fixed = [
        t.system_attrs["fixed_params"] for t in study.trials if "fixed_params" in t.system_attrs
    ]
    assert sorted(fixed, key=str) == sorted(
        (load_spec(path, env={}).typed_point(p) for p in load_spec(path, env={}).warm_start),
        key=str,
    ), fixed
    assert state_counts(study).complete == 8


def test_enqueue_refuses_a_point_outside_the_space_and_skips_a_repeat(
    tmp_path, sqlite_url, study_name
):
    spec = load_spec(conditional_spec(tmp_path, sqlite_url, study_name), env={})
    study = open_study(spec)
    assert enqueue(study, spec, {"adapter": "lora", "lora_r": 12}) is True
    assert enqueue(study, spec, {"adapter": "lora", "lora_r": 12}) is False
    with pytest.raises(SpecError, match="lora_r: applies only when adapter is lora"):
        enqueue(study, spec, {"lora_r": 12})
    # the warm start's two and this one
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 3


def test_a_stop_signal_while_a_sqlite_schema_is_created_waits_for_the_whole_schema(tmp_path):
    """Optuna creates a new database's tables one statement at a time: `hpo tune` killed ~1 s
    after its start left a file with some tables, and the next run made duplicate studies and
    `hpo status` a traceback. The signal now waits until the schema is whole, then stops."""
    import signal
    import sqlite3

    probe = (
        "import signal, sys\n"
        "import sqlalchemy as sa\n"
        "from hpo.study.storage import get_storage\n"
        "cut = []\n"
        "@sa.event.listens_for(sa.Table, 'after_create')\n"
        "def stop_after_the_first_table(target, connection, **kw):\n"
        "    if not cut:\n"
        "        cut.append(target.name)\n"
        "        signal.raise_signal(signal.SIGTERM)\n"
        "get_storage(f'sqlite:///{sys.argv[1]}')\n"
        "print('went on after the signal', flush=True)\n"
    )

    def schema(path) -> list:
        with contextlib.closing(sqlite3.connect(path)) as connection:
            return sorted(connection.execute("SELECT type, name FROM sqlite_master").fetchall())

    cut = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "cut.db")], capture_output=True, text=True
    )
    assert cut.returncode == -signal.SIGTERM and "went on" not in cut.stdout, cut.stderr[-2000:]
    get_storage(f"sqlite:///{tmp_path / 'whole.db'}")
    assert schema(tmp_path / "cut.db") == schema(tmp_path / "whole.db")
