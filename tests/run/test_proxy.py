"""``hpo storage-proxy``: real workers through Optuna's gRPC proxy onto real PostgreSQL,
and the stale-trial sweep that stands in for heartbeats behind it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import optuna
import pytest
from optuna.artifacts import get_all_artifact_meta
from optuna.trial import TrialState

from hpo.attributes import HEARTBEAT_ATTR
from hpo.errors import UsageError
from hpo.run.proxy import serve
from hpo.spec import set_flags
from hpo.study import sweep_stale_trials
from hpo.study.storage import caused_by_database, database_error_text, get_storage
from tests.support import REPO
from tests.support.helpers import free_port, run_hpo
from tests.support.shared_storage import read_study
from tests.support.tune_cli import study_sets, tune_assets

if not os.environ.get("CI"):  # CI installs hpo[proxy] (the Makefile's EXTRAS) and must never skip
    pytest.importorskip("grpc", reason="needs grpcio: pip install 'hpo[proxy]'")


@pytest.fixture(scope="module")
def proxy(postgres_url, tmp_path_factory):
    """A real proxy on a free port in front of the test database, sweeping every 2 s."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("proxy") / "proxy.log"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hpo",
                "storage-proxy",
                "--storage",
                postgres_url,
                "--port",
                str(port),
                "--sweep-seconds",
                "2",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        from optuna.storages import GrpcStorageProxy

        try:
            GrpcStorageProxy(host="127.0.0.1", port=port).wait_server_ready(timeout=60)
        except ConnectionError:
            pytest.fail(
                f"the proxy did not start (exit {proc.poll()}): {log_path.read_text()[-2000:]}"
            )
        yield {"url": f"grpc://127.0.0.1:{port}", "log": log_path, "proc": proc}
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta):
    return tune_assets(
        tmp_path_factory.mktemp("proxy-tune"), tiny_roberta, tiny_deberta, posts=40, seed=3
    )


@pytest.mark.slow
@pytest.mark.postgres
def test_three_workers_through_the_proxy_finish_exactly_n_trials(
    proxy, postgres_url, study_name, assets
):
    out = assets["root"] / study_name
    from hpo.process import available_cpus

    run = run_hpo(
        "tune",
        str(REPO / "studies" / "evidence-smoke.yaml"),
        "--workers",
        str(min(3, available_cpus())),  # hpo tune refuses more workers than cores
        "--no-progress",
        "--storage",
        proxy["url"],
        "--set",
        "n_trials=5",
        "--set",
        "train.epochs=1",
        *set_flags(study_sets(study_name, assets, out)),
        timeout=300,
        cwd=assets["root"],
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "grpc://127.0.0.1" in run.stdout and "best trial" in run.stdout

    # straight from PostgreSQL
    study = read_study(study_name, postgres_url)
    finished = study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))
    assert len(finished) == 5, [(t.number, t.state.name) for t in study.trials]
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    # Live workers beat through the proxy, so its sweep (every 2 s here) failed nothing.
    assert not [
        t for t in study.trials if t.state == TrialState.FAIL and "fail_reason" not in t.user_attrs
    ]
    assert all(HEARTBEAT_ATTR in t.system_attrs for t in finished)
    # a finished trial's line names its worker once, as its prefix: "[host/1] trial 3 COMPLETE"
    ran = {
        found.group(1)
        for line in run.stdout.splitlines()
        if (found := re.search(r"\[([^\]\s]+)\] trial \d+ (?:COMPLETE|PRUNED)", line))
    }
    workers = {t.user_attrs["worker"] for t in finished}
    assert workers == ran and len(workers) >= 2, (workers, run.stdout[-3000:])
    assert study.user_attrs["n_trials"] == 5  # open_study's attributes went through the proxy too
    complete = [t for t in finished if t.state == TrialState.COMPLETE]
    assert complete
    for trial in complete:
        assert "metrics.json" in {
            m.filename for m in get_all_artifact_meta(trial, storage=study._storage)
        }
    assert "failed as stale" not in proxy["log"].read_text()


def _ask(storage, name: str) -> tuple[optuna.Study, optuna.Trial]:
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize")
    trial = study.ask()
    trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True)
    trial.suggest_categorical("encoder", ["tiny-roberta", "tiny-deberta"])
    return study, trial


# The sweep passes over every study on its storage: a private SQLite file keeps it off the
# shared test database, where other tests' trials are running.
def test_sweep_fails_and_requeues_a_trial_without_heartbeat_past_the_max_age(
    sqlite_url, study_name
):
    storage = get_storage(sqlite_url)
    study, trial = _ask(storage, study_name)
    assert sweep_stale_trials(storage, max_trial_seconds=60) == []  # young: left alone
    time.sleep(0.3)
    assert sweep_stale_trials(storage, max_trial_seconds=0.2) == [trial._trial_id]
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.WAITING]
    assert (
        trials[1].params == trials[0].params and trials[1].distributions == trials[0].distributions
    )
    assert trials[1].system_attrs["failed_trial"] == trial.number
    assert sweep_stale_trials(storage, max_trial_seconds=0.2) == []  # WAITING is not RUNNING


def test_sweep_fails_a_trial_whose_beat_stopped_and_spares_one_that_beats(sqlite_url, study_name):
    storage = get_storage(sqlite_url)
    study, stopped = _ask(storage, study_name)
    beating = study.ask()
    beating.suggest_float("learning_rate", 1e-4, 1e-2, log=True)
    for trial in (stopped, beating):
        storage.set_trial_system_attr(
            trial._trial_id, HEARTBEAT_ATTR, {"at": 1.0, "grace_period": 0.3, "max_retry": 0}
        )
    beats: dict = {}
    # A beat is judged only once seen unchanged for its grace period, never by age alone.
    assert sweep_stale_trials(storage, max_trial_seconds=0.01, beats=beats) == []
    time.sleep(0.5)
    storage.set_trial_system_attr(
        beating._trial_id, HEARTBEAT_ATTR, {"at": 2.0, "grace_period": 0.3, "max_retry": 0}
    )
    assert sweep_stale_trials(storage, max_trial_seconds=0.01, beats=beats) == [stopped._trial_id]
    states = {t.number: t.state for t in study.get_trials()}
    assert states == {
        stopped.number: TrialState.FAIL,
        beating.number: TrialState.RUNNING,
    }  # max_retry 0: no copy
    assert set(beats) == {beating._trial_id}


def test_proxy_outage_counts_as_a_database_outage_for_the_worker_retry():
    from optuna.storages import GrpcStorageProxy

    with pytest.raises(Exception) as caught:
        GrpcStorageProxy(host="127.0.0.1", port=free_port()).get_all_studies()
    assert caused_by_database(caught.value)
    assert database_error_text(caught.value).startswith("storage proxy: UNAVAILABLE")


def test_database_outage_behind_the_proxy_counts_as_a_database_outage():
    """Optuna's servicer lets a database error through; gRPC reports it as UNKNOWN with its text."""
    import psycopg2
    import sqlalchemy as sa
    from optuna.storages import GrpcStorageProxy, InMemoryStorage
    from optuna.storages._grpc.server import make_server

    class DatabaseGone(InMemoryStorage):
        def get_all_studies(self):
            raise sa.exc.OperationalError(
                "SELECT 1", {}, psycopg2.OperationalError("server closed the connection")
            )

    port = free_port()
    server = make_server(DatabaseGone(), "127.0.0.1", port)
    server.start()
    try:
        with pytest.raises(Exception) as caught:
            GrpcStorageProxy(host="127.0.0.1", port=port).get_all_studies()
    finally:
        server.stop(0)
    assert caused_by_database(caught.value)
    assert "server closed the connection" in database_error_text(caught.value)


def test_worker_storage_without_a_proxy_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr("hpo.study.storage._connect.PROXY_CONNECT_SECONDS", 1)
    with pytest.raises(
        UsageError, match="no storage proxy answers at grpc://127.0.0.1:.*hpo storage-proxy"
    ):
        get_storage(f"grpc://127.0.0.1:{free_port()}")


def test_proxy_refuses_another_proxy_as_its_storage():
    with pytest.raises(UsageError, match="needs the database"):
        serve("grpc://127.0.0.1:13000", "127.0.0.1", free_port(), 30, 86400)


def test_proxy_refuses_a_port_in_use_although_grpc_would_share_it(sqlite_url):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(UsageError, match="Address already in use"):
            serve(sqlite_url, "127.0.0.1", busy.getsockname()[1], 30, 86400)


def test_proxy_refuses_an_unreachable_database_in_one_line_without_the_password():
    run = run_hpo(
        "storage-proxy",
        "--storage",
        "postgresql://postgres:s3cret@127.0.0.1:1/x",
        "--port",
        str(free_port()),
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert (
        "cannot use the database at" in run.stderr and "postgres:***@127.0.0.1:1" in run.stderr
    ), run.stderr
    assert "s3cret" not in run.stdout + run.stderr and "Traceback" not in run.stderr, (
        run.stdout + run.stderr
    )
