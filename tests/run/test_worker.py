"""How a worker stops when it cannot go on: one line naming why, never a traceback."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
from optuna.trial import TrialState

from hpo.fixtures import write_sample
from hpo.run import worker as worker_module
from hpo.spec import load_spec
from hpo.study.search import suggest
from hpo.study.storage import database_error_text
from tests.support import REPO
from tests.support.shared_storage import delete_until_gone, read_study

SMOKE = REPO / "studies" / "evidence-smoke.yaml"


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("worker")
    return {
        "root": root,
        "data": write_sample(root / "data", posts=40, seed=0),
        "roberta": tiny_roberta,
        "deberta": tiny_deberta,
    }


def overrides(name: str, assets, *extra: str) -> list[str]:
    return [
        f"name={name}",
        f"data_dir={assets['data']}",
        f"output_dir={assets['root'] / name}",
        f"model_paths.tiny-roberta={assets['roberta']}",
        f"model_paths.tiny-deberta={assets['deberta']}",
        "keep_top_k=0",
        *extra,
    ]


def outage() -> sa.exc.OperationalError:
    return sa.exc.OperationalError(
        "SELECT 1", {}, Exception("server closed the connection unexpectedly")
    )


def test_the_database_reason_is_found_under_optunas_unbound_local_error():
    try:
        try:
            raise outage()
        except sa.exc.OperationalError:
            raise UnboundLocalError("cannot access local variable 'updated_state'") from None
    except UnboundLocalError as exc:
        raised = exc
    raised.__context__ = outage()  # what Optuna 5.0's _run_trial leaves behind
    assert database_error_text(raised) == "server closed the connection unexpectedly"


@pytest.mark.slow
def test_a_long_outage_stops_the_worker_with_one_line_naming_the_database(
    sqlite_url, study_name, assets, monkeypatch
):
    spec = load_spec(SMOKE, overrides(study_name, assets, "n_trials=50"), storage=sqlite_url)
    calls = []
    real_census = worker_module.trial_census

    def census_then_outage(*args, **kwargs):
        calls.append(time.monotonic())
        if len(calls) > 2:
            raise outage()
        return real_census(*args, **kwargs)

    monkeypatch.setattr(worker_module, "trial_census", census_then_outage)
    monkeypatch.setattr(worker_module, "DATABASE_RETRY_SECONDS", (0.2, 0.5))
    monkeypatch.setattr(worker_module, "DATABASE_OUTAGE_SECONDS", 2)
    with pytest.raises(worker_module.DatabaseUnreachable) as caught:
        worker_module.run_worker(
            spec,
            worker="w",
            objective=lambda t: suggest(t, spec)["learning_rate"],
            poll_seconds=0.1,
        )
    message = str(caught.value)
    assert message.startswith("worker w: stopping after ") and (
        "of waiting: database unreachable (server closed the connection unexpectedly)" in message
    )
    # what is true of a study in a database that is only away: kept, resumed once it is back
    assert "the trials it recorded stay in it" in message and "`hpo tune` resumes" in message
    assert "\n" not in message
    assert calls[-1] - calls[2] >= 2, "it kept retrying for the whole outage budget"


@pytest.mark.slow
def test_a_worker_meeting_an_outage_as_it_starts_waits_for_the_database_then_runs(
    sqlite_url, study_name, assets, monkeypatch, caplog
):
    """The database failing after the study is found, as the worker reads its deadline: it
    waited mid-run but not here, so a worker starting during a restart (or a revoked privilege)
    died with a traceback. Now it backs off as it does mid-run, then runs its trials."""
    spec = load_spec(SMOKE, overrides(study_name, assets, "n_trials=3"), storage=sqlite_url)
    calls = []
    real_deadline = worker_module.study_deadline

    def outage_then_deadline(study):
        calls.append(time.monotonic())
        if len(calls) <= 2:
            raise optuna.exceptions.StorageInternalError("in the commit") from outage()
        return real_deadline(study)

    monkeypatch.setattr(worker_module, "study_deadline", outage_then_deadline)
    monkeypatch.setattr(worker_module, "DATABASE_RETRY_SECONDS", (0.2, 0.5))
    with caplog.at_level(logging.WARNING, logger=worker_module.__name__):
        ran = worker_module.run_worker(
            spec,
            worker="w",
            objective=lambda t: suggest(t, spec)["learning_rate"],
            poll_seconds=0.1,
        )
    assert ran == 3 and len(calls) == 3
    waits = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert waits == [
        "worker w: database unreachable (server closed the connection unexpectedly); "
        f"retrying in {delay}s"
        for delay in (0.2, 0.5)
    ]


@pytest.mark.postgres
@pytest.mark.slow
def test_a_database_dropped_for_good_is_called_gone_never_safe(
    postgres_url, study_name, assets, monkeypatch
):
    """The study's database dropped mid-run: after its outage budget the worker says the study
    is gone with it (issue #34 item 8: it said "the study is safe in it")."""
    base = sa.make_url(postgres_url)
    database = f"hpo_drop_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {database}"))
    url = base.set(database=database).render_as_string(False)
    spec = load_spec(SMOKE, overrides(study_name, assets, "n_trials=50"), storage=url)

    def objective(trial):
        if trial.number == 2:
            with admin.connect() as conn:
                conn.execute(sa.text(f"DROP DATABASE {database} WITH (FORCE)"))
        return suggest(trial, spec)["learning_rate"]

    monkeypatch.setattr(worker_module, "DATABASE_RETRY_SECONDS", (0.2, 0.5))
    monkeypatch.setattr(worker_module, "DATABASE_OUTAGE_SECONDS", 2)
    try:
        with pytest.raises(worker_module.DatabaseUnreachable) as caught:
            worker_module.run_worker(spec, worker="w", objective=objective, poll_seconds=0.1)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        admin.dispose()
    message = str(caught.value)
    assert "of waiting: the study's database is gone (" in message
    assert f'database "{database}" does not exist' in message
    assert "the study's trials with it unless it is restored from a backup" in message
    assert "safe" not in message and "resume" not in message and "\n" not in message


@pytest.mark.postgres
def test_database_problems_are_named_with_what_is_true_and_what_to_do(postgres_url):
    """Real PostgreSQL errors: a privilege missing says what to GRANT, a table or database that
    does not exist says the study is gone, a refused connection says unreachable."""
    from hpo.study.storage import database_problem

    base = sa.make_url(postgres_url)
    role = f"hpo_noperm_{uuid.uuid4().hex[:8]}"
    study = optuna.create_study(storage=postgres_url)

    def error_of(statement: str, database: str | None = None, port: int | None = None):
        engine = sa.create_engine(base.set(database=database or base.database, port=port))
        try:
            with engine.begin() as conn:
                conn.execute(sa.text(statement))
        except sa.exc.SQLAlchemyError as exc:
            return exc
        finally:
            engine.dispose()
        raise AssertionError(f"{statement} did not fail")

    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {role} NOLOGIN"))
    try:  # a role without the privilege: pg_authid is for superusers only
        denied = database_problem(study, error_of(f"SET ROLE {role}; SELECT * FROM pg_authid"))
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP ROLE {role}"))
        admin.dispose()
    assert denied.kind == "refused" and "permission denied for table pg_authid" in str(denied)
    # the storage URL's user, the one to grant to
    grant = (
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {base.username}"
    )
    assert grant in str(denied)
    no_table = database_problem(study, error_of("SELECT * FROM no_such_table_here"))
    no_database = database_problem(study, error_of("SELECT 1", database="no_such_db_here"))
    assert no_table.gone and no_database.gone and "restored from a backup" in str(no_database)
    refused = database_problem(study, error_of("SELECT 1", port=1))
    assert refused.kind == "unreachable" and str(refused).startswith("database unreachable (")


@pytest.mark.slow
@pytest.mark.postgres
def test_a_study_deleted_under_a_running_worker_stops_it_in_one_line(
    postgres_url, study_name, assets
):
    cmd = [sys.executable, "-m", "hpo", "worker", str(SMOKE), "--name", "w", "--threads", "1"]
    for item in overrides(study_name, assets, "n_trials=20", "train.epochs=3"):
        cmd += ["--set", item]
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, "HPO_STORAGE": postgres_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                if read_study(study_name, postgres_url).get_trials(states=(TrialState.RUNNING,)):
                    break
            except KeyError:  # not created yet
                continue
        delete_until_gone(study_name, postgres_url)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert f"study {study_name!r} was deleted from its storage" in output.strip().splitlines()[-1]
    assert study_name not in {s.study_name for s in optuna.get_all_study_summaries(postgres_url)}


def test_a_stop_signal_while_a_failure_is_recorded_keeps_its_reason_and_does_not_retry_it(
    storage_url, study_name, assets, monkeypatch
):
    """The launcher ends a study (its breaker tripped) while a worker records why its trial
    failed: the reason is written whole, and the trial, failed on its own, is not re-queued."""
    spec = load_spec(SMOKE, overrides(study_name, assets, "n_trials=5"), storage=storage_url)
    real_reason = worker_module.failure_reason

    def reason_then_stop(exc):
        os.kill(os.getpid(), signal.SIGTERM)
        return real_reason(exc)

    def objective(trial):
        suggest(trial, spec)
        raise ValueError("weights are damaged")

    monkeypatch.setattr(worker_module, "failure_reason", reason_then_stop)
    with pytest.raises(KeyboardInterrupt):
        worker_module.run_worker(spec, worker="w", objective=objective, poll_seconds=0.1)
    study = read_study(study_name, storage_url)
    assert [t.state for t in study.trials] == [TrialState.FAIL]
    assert study.trials[0].user_attrs["fail_reason"] == "ValueError: weights are damaged"
    assert not study.get_trials(states=(TrialState.WAITING,)), (
        "a trial that failed on its own is not retried"
    )


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_inside_optunas_ask_leaves_no_orphan_running_trial(
    storage_url, study_name, assets, monkeypatch, stop
):
    """The signal lands after ask() created the RUNNING trial, before its objective and
    heartbeat start (a Slurm pre-emption can come at any moment): the trial still ends
    FAIL and is queued again, instead of staying RUNNING where no heartbeat would free it."""
    spec = load_spec(SMOKE, overrides(study_name, assets, "n_trials=5"), storage=storage_url)
    real_before_trial = optuna.samplers.TPESampler.before_trial
    asked = []

    def before_trial(
        sampler, study, trial
    ):  # inside ask(), the trial already RUNNING in the storage
        asked.append(trial.number)
        if len(asked) == 2:
            os.kill(os.getpid(), stop)
        return real_before_trial(sampler, study, trial)

    monkeypatch.setattr(optuna.samplers.TPESampler, "before_trial", before_trial)
    with pytest.raises(KeyboardInterrupt):
        worker_module.run_worker(
            spec,
            worker="w",
            objective=lambda t: suggest(t, spec)["learning_rate"],
            poll_seconds=0.1,
        )
    study = read_study(study_name, storage_url)
    states = {t.number: t.state for t in study.trials}
    assert states[0] == TrialState.COMPLETE and states[1] == TrialState.FAIL, states
    assert TrialState.RUNNING not in states.values(), "nothing may be left RUNNING"
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert len(waiting) == 1 and waiting[0].params == study.trials[1].params


def test_two_workers_counting_the_last_place_at_once_start_one_trial_not_a_surplus(
    storage_url, study_name, assets, monkeypatch
):
    """Issue #48 item 5: two workers that both counted room for the study's last trial both
    asked for one, and the later stepped aside as a FAIL trial ("surplus: the study already
    has 12 trials"), red in the dashboard and hpo export while status said 0 failed. Here both
    count before either asks (they meet at a barrier inside ``ask``): under the trial-start lock
    the second counts only once the first trial exists, and starts none."""
    import threading

    from hpo.study import open_study

    spec = load_spec(SMOKE, overrides(study_name, assets, "n_trials=1"), storage=storage_url)
    open_study(spec)  # created once, as hpo tune creates it before its workers go
    together, real_ask = threading.Barrier(2, timeout=3), optuna.Study.ask

    def ask_together(study, *args, **kwargs):
        with contextlib.suppress(threading.BrokenBarrierError):  # the other never came
            together.wait()
        return real_ask(study, *args, **kwargs)

    monkeypatch.setattr(optuna.Study, "ask", ask_together)
    errors = []

    def work(name: str) -> None:
        try:
            worker_module.run_worker(
                spec,
                worker=name,
                objective=lambda t: suggest(t, spec)["learning_rate"],
                poll_seconds=0.1,
            )
        except Exception as exc:  # noqa: BLE001 - reported below, with the thread's name
            errors.append((name, exc))

    workers = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(2)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=120)
    assert not errors and not any(thread.is_alive() for thread in workers), errors
    trials = read_study(study_name, storage_url).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE], [
        (t.number, t.state.name, t.user_attrs.get("fail_reason")) for t in trials
    ]


@pytest.mark.slow
def test_the_worker_looks_for_stale_trials_once_an_interval_and_fails_them_saying_why(
    storage_url, study_name, assets, monkeypatch, caplog
):
    """The worker, not the storage, decides when to look: once per heartbeat interval
    however short its trials, and each look answers from the database. A dead worker's
    trial (beaten, then silent past the grace period) is failed with the reason recorded
    and a log line, and its retry runs with the same parameters."""
    from hpo.study import open_study
    from hpo.study.storage import first_heartbeat
    from hpo.study.storage._heartbeat import OneStatementHeartbeat

    spec = load_spec(
        SMOKE,
        overrides(
            study_name, assets, "n_trials=40", "heartbeat.interval=1", "heartbeat.grace_period=2"
        ),
        storage=storage_url,
    )
    dead = open_study(spec).ask()
    params = suggest(dead, spec)
    first_heartbeat(dead)
    time.sleep(3.2)  # past the grace period by over a second: SQLite's clock counts whole seconds
    looks, real_look = [], OneStatementHeartbeat.stale_trial_ids

    def counted_look(storage, study_id, **options):
        looks.append(time.monotonic())
        return real_look(storage, study_id, **options)

    monkeypatch.setattr(OneStatementHeartbeat, "stale_trial_ids", counted_look)

    def objective(trial):  # ~0.1 s a trial: several trials per interval
        time.sleep(0.1)
        return suggest(trial, spec)["learning_rate"]

    started = time.monotonic()
    with caplog.at_level("WARNING"):
        worker_module.run_worker(spec, worker="w", objective=objective, poll_seconds=0.1)
    elapsed = time.monotonic() - started
    assert 1 <= len(looks) <= elapsed / 1 + 1, f"{len(looks)} looks in {elapsed:.1f}s"
    study = read_study(study_name, storage_url)
    failed = study.trials[dead.number]
    assert failed.state == TrialState.FAIL
    assert failed.user_attrs["fail_reason"].startswith("no heartbeat for over 2s")
    assert any(f"trial {dead.number} FAIL: no heartbeat" in r.getMessage() for r in caplog.records)
    retry = [t for t in study.trials if t.system_attrs.get("failed_trial") == dead.number]
    assert len(retry) == 1 and retry[0].state == TrialState.COMPLETE and retry[0].params == params
    assert "fail_reason" not in retry[0].user_attrs


def test_an_interrupted_trial_is_one_line_not_a_traceback(storage_url, study_name, assets, caplog):
    """Ctrl-C or SIGTERM mid-trial: the trial is failed and re-queued as before, and the
    log says so in one line, without Optuna's traceback of the KeyboardInterrupt."""
    spec = load_spec(SMOKE, overrides(study_name, assets, "n_trials=5"), storage=storage_url)

    def objective(trial):
        suggest(trial, spec)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the signal lands here
        return 0.0

    with caplog.at_level("INFO"), pytest.raises(KeyboardInterrupt):
        worker_module.run_worker(spec, worker="w", objective=objective, poll_seconds=0.1)
    study = read_study(study_name, storage_url)
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.WAITING], (
        "failed and re-queued"
    )
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in records] == [
        "worker w interrupted; its running trial 0 was re-queued"
    ]
    assert not any(r.exc_info for r in caplog.records), "no traceback"


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        ("5T", "--memory-limit 5242880M for 1 worker(s) is more than this machine's"),
        ("10M", "under the 1024 MiB a worker needs"),
        ("inf", "argument --memory-limit: must be a finite number"),  # was an OverflowError
    ],
)
def test_a_memory_limit_past_the_machine_or_too_small_to_work_in_is_one_line_exit_2(limit, said):
    """Issue #34 item 7: `hpo worker --memory-limit 5T` on a machine of GiBs turned the ceiling
    off in silence; 10M would fail every trial."""
    run = subprocess.run(
        [sys.executable, "-m", "hpo", "worker", str(SMOKE), "--memory-limit", limit],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith(("hpo: error: ", "hpo worker: error: ")) and said in run.stderr
    assert "--memory-limit" in run.stderr


@pytest.mark.slow
def test_a_worker_on_a_machine_without_the_model_refuses_before_it_takes_a_trial(
    tmp_path, study_name, assets
):
    """`hpo worker` on a second machine whose model path is missing retried the hub for each
    file, printed dozens of lines and failed every trial it took in the shared study: it now
    checks what `hpo tune` checks first, and says it in one line before the study exists."""
    missing = tmp_path / "models" / "tiny-roberta"  # absolute: no hub id, no network wait
    database = tmp_path / "hpo.db"
    cmd = [sys.executable, "-m", "hpo", "worker", str(SMOKE), "--storage", f"sqlite:///{database}"]
    for item in overrides(study_name, assets, f"model_paths.tiny-roberta={missing}"):
        cmd += ["--set", item]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert f"encoder 'tiny-roberta': {missing} does not exist" in run.stderr
    assert "model_paths.tiny-roberta=" in run.stderr and run.stdout == ""
    assert optuna.get_all_study_names(f"sqlite:///{database}") == []


def test_a_trial_failed_as_stale_while_its_worker_was_cut_off_is_dropped_not_a_crash(
    sqlite_url, study_name, assets, caplog
):
    """While the database was away a trial's heartbeat went unwritten, and another worker
    failed it as stale and queued it again: the worker that ran it, told its result, keeps
    going with one line (a CI run once died here on Optuna's "Cannot tell a FAIL trial")."""
    spec = load_spec(SMOKE, overrides(study_name, assets, "n_trials=2"), storage=sqlite_url)

    def objective(trial):
        suggest(trial, spec)
        if trial.number == 0:  # the other worker's stale sweep, through the public API
            optuna.load_study(study_name=study_name, storage=sqlite_url).tell(
                trial.number, state=TrialState.FAIL
            )
        return 0.5

    with caplog.at_level("INFO"):
        worker_module.run_worker(spec, worker="w", objective=objective, poll_seconds=0.1)
    study = read_study(study_name, sqlite_url)
    assert [t.state for t in study.trials][:2] == [TrialState.FAIL, TrialState.COMPLETE]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "trial 0 was failed as stale while this worker could not reach the database, and "
        "queued again; this run of it is dropped"
    ]


def test_a_worker_stopped_while_its_study_is_deleted_says_so_in_one_line(
    sqlite_url, study_name, assets, caplog
):
    """The launcher stops its workers once the study is deleted under them: a worker interrupted
    then cannot re-queue its trial, and says why in one line (a CI run once printed Optuna's
    "Record does not exist" traceback here)."""
    spec = load_spec(SMOKE, overrides(study_name, assets, "n_trials=2"), storage=sqlite_url)

    def objective(trial):
        suggest(trial, spec)
        delete_until_gone(study_name, sqlite_url)
        raise KeyboardInterrupt  # the launcher's stop, landing as the study goes

    with caplog.at_level("INFO"), pytest.raises(KeyboardInterrupt):
        worker_module.run_worker(spec, worker="w", objective=objective, poll_seconds=0.1)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "worker w interrupted; its study was deleted from its storage"
    ]
