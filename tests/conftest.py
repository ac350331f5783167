"""Shared fixtures: tiny real encoders saved to disk, and real storage URLs.

PostgreSQL is never mocked: tests use the local server (``HPO_TEST_POSTGRES``, default
``postgresql+psycopg2://postgres@127.0.0.1:5432/hpo_test``, one database per xdist worker),
creating the database if needed. Every test that reaches it is marked ``postgres``, so
``make test-fast`` (``-m "not slow and not postgres"``) runs with no server at all.
"""

from __future__ import annotations

import fcntl
import gc
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import optuna
import psutil
import pytest
import sqlalchemy as sa
import torch

from hpo.fixtures import make_tiny_encoder
from tests.support.cli_studies import CONDITIONAL, RESULTS, build_study
from tests.support.helpers import unavailable

_BASE_POSTGRES_URL = sa.make_url(
    os.environ.get("HPO_TEST_POSTGRES", "postgresql+psycopg2://postgres@127.0.0.1:5432/hpo_test")
)
# Under `pytest -n` each xdist worker gets a database of its own (hpo_test_gw0, ...), so one
# worker's studies, roles and connection counts never meet another's.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
POSTGRES_URL = (
    _BASE_POSTGRES_URL.set(database=f"{_BASE_POSTGRES_URL.database}_{_XDIST_WORKER}")
    if _XDIST_WORKER
    else _BASE_POSTGRES_URL
).render_as_string(hide_password=False)
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests must never reach a model hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
POSTGRES_PORT = _BASE_POSTGRES_URL.port or 5432
# What a test trains in this process (the objective, the loop, a scored model) runs on one torch
# thread, as hpo's own workers and retrainings do beside other work (hpo.process.
# threads_per_process): at torch's default of every core, two test processes on 2 cores (make
# test's -n 2) oversubscribe them, and a 30-post trial took 35 s where one thread takes 1.6 s.
# The processes a test starts choose their own threads, as hpo does for a user; a test of a
# command's --threads sets another count first, so that its 1 is the command's doing.
torch.set_num_threads(1)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(items):
    """A test using ``postgres_url``, itself or through a fixture, needs the server: marked
    ``postgres`` here rather than by hand, so none is missed. (``storage_url`` reaches it only
    in its postgres case, which carries the mark itself.)"""
    for item in items:
        if "postgres_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under `pytest -n`, a test marked ``serial`` (it stops or restarts the PostgreSQL server
    every worker shares) runs while no other test does, set-up included (a module's fixture may
    train on the database): it holds a file lock exclusively, every other test holds it
    shared. The gate taken first keeps the lock fair: once a serial test waits, no new test
    starts. xdist has no such mode; without xdist nothing is locked."""
    if not _XDIST_WORKER:
        return (yield)
    folder = Path(tempfile.gettempdir()) / f"hpo-tests-{os.environ['PYTEST_XDIST_TESTRUNUID']}"
    folder.mkdir(exist_ok=True)
    serial = item.get_closest_marker("serial") is not None
    with open(folder / "serial.gate", "a") as gate, open(folder / "serial.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
        if not serial:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            return (yield)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _close_dropped_database_connections():
    """After each test, close the connections of storages it dropped (in-process commands,
    ``optuna.load_study`` with a URL): they stay open until the garbage collector breaks
    their engines' reference cycles, and PostgreSQL allows 100 clients for the whole run.
    Collected only past a few (tests/support/shared_storage.py keeps one pool open on purpose),
    as a full collection costs ~0.15 s here."""
    yield
    open_ = [
        c for c in psutil.Process().net_connections() if c.raddr and c.raddr.port == POSTGRES_PORT
    ]
    if len(open_) > 5:
        gc.collect()


@pytest.fixture(scope="session")
def chromium() -> str:
    """Headless Chromium, for the pages that must be seen rendered (the dashboard, the
    explanation report): skipped without it on a workstation, failed in CI (.ci/run installs
    it)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path:
        return path
    unavailable(
        "headless Chromium is not installed: apt-get install -y chromium "
        "(.ci/run installs it in CI)"
    )


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory) -> Path:
    return make_tiny_encoder("roberta", tmp_path_factory.mktemp("tiny-roberta"))


@pytest.fixture(scope="session")
def tiny_deberta(tmp_path_factory) -> Path:
    return make_tiny_encoder("deberta-v2", tmp_path_factory.mktemp("tiny-deberta"))


@pytest.fixture(scope="session", params=["roberta", "deberta-v2"])
def tiny_encoder(request, tiny_roberta, tiny_deberta) -> Path:
    """Each test using it runs once per architecture."""
    return tiny_roberta if request.param == "roberta" else tiny_deberta


@pytest.fixture(scope="session")
def tiny_roberta_mlm(tmp_path_factory) -> Path:
    """A masked-LM with its output layer tied to the input embeddings."""
    return make_tiny_encoder("roberta", tmp_path_factory.mktemp("tiny-roberta-mlm"), masked_lm=True)


def _ensure_database(url: str) -> None:
    target = sa.make_url(url).set(drivername="postgresql+psycopg2")
    admin = sa.create_engine(
        target.set(database="postgres"),
        isolation_level="AUTOCOMMIT",
        connect_args={"connect_timeout": 10},  # a host that drops packets: not a hung session
    )
    try:
        with admin.connect() as conn:
            exists = conn.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": target.database}
            ).scalar()
            if not exists:
                conn.execute(sa.text(f'CREATE DATABASE "{target.database}"'))
    finally:
        admin.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The real local PostgreSQL: a server that does not answer skips the tests on a
    workstation and fails them in CI (.ci/run starts it)."""
    try:
        _ensure_database(POSTGRES_URL)
    except sa.exc.OperationalError as error:
        reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
        unavailable(
            f"PostgreSQL does not answer at {sa.make_url(POSTGRES_URL).render_as_string()} "
            f"({reason}): start it, or set HPO_TEST_POSTGRES to one that runs"
        )
    return POSTGRES_URL


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'hpo.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def storage_url(request, tmp_path) -> str:
    """Every storage case on both backends, as Optuna's own tests do."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'hpo.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def study_name() -> str:
    """Unique per test, so tests sharing the PostgreSQL database never collide."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def finished(postgres_url, study_name, tmp_path) -> optuna.Study:
    """A finished study on PostgreSQL, for the commands that read one
    (tests/support/cli_studies.py)."""
    return build_study(postgres_url, study_name, tmp_path / "checkpoints", n_trials=len(RESULTS))


@pytest.fixture
def conditional(tmp_path, study_name) -> Path:
    """The spec with a conditional space and a warm start (tests/support/cli_studies.py), in a
    file."""
    path = tmp_path / "conditional.yaml"
    path.write_text(
        CONDITIONAL.format(name=study_name, data_dir=tmp_path / "data", encoder="unused")
    )
    return path
