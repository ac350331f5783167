"""Storage URLs to ready Optuna storages.

One function normalises every storage URL (as Optuna's own ``get_storage`` does):
SQLite gets a long lock timeout, PostgreSQL a bounded pool that checks idle connections, both get
heartbeats so a dead worker's trial is failed and re-queued with the same parameters,
and ``grpc://host:port`` goes through Optuna's storage proxy (``hpo storage-proxy``), where
a worker's heartbeat is a trial system attribute that the proxy host judges.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from pathlib import Path

import optuna
import sqlalchemy as sa
from optuna.storages import GrpcStorageProxy, RDBStorage, RetryHeartbeatStaleTrialCallback
from sqlalchemy import event

from hpo.attributes import HEARTBEAT_ATTR
from hpo.errors import UsageError, find_cause
from hpo.process import stop_signals_deferred
from hpo.spec import HeartbeatSpec
from hpo.storage_url import StorageUrl
from hpo.study.storage._heartbeat import OneStatementHeartbeat
from hpo.study.storage._optuna_private import uncached

log = logging.getLogger(__name__)

PROXY_CONNECT_SECONDS = 10

# Heartbeats and the retry callback are marked experimental; they are what keeps trials safe here.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def get_storage(
    url: StorageUrl | str, heartbeat: HeartbeatSpec | None = None
) -> optuna.storages.BaseStorage:
    """A ready storage for ``url``, or a one-line UsageError naming what is wrong.
    Workers pass ``heartbeat``; read-only commands do not."""
    url = StorageUrl.of(url)
    if url.is_grpc:
        return _grpc_storage(url, heartbeat)
    url, parsed = _database_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            try:
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(
                    f"storage {url.redacted!r}: cannot create {Path(parsed.database).parent}: "
                    f"{exc.strerror}"
                ) from None
        # several workers share one file lock; isolation_level None: transactions are begun by
        # _serialize_transactions, not by the sqlite3 module
        engine_kwargs = {"connect_args": {"timeout": 120, "isolation_level": None}}
    else:
        engine_kwargs = {
            "pool_size": 2,
            "max_overflow": 2,
            "pool_recycle": 1800,
            "connect_args": {"connect_timeout": 10},
        }
    extra = {}
    if heartbeat:
        extra = dict(
            heartbeat_interval=heartbeat.interval,
            grace_period=heartbeat.grace_period,
            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(
                max_retry=heartbeat.max_retry
            ),
        )
    # Optuna creates a new database's tables one statement at a time: a SQLite file cut off
    # half-way (a Ctrl-C or kill just after start) made duplicate studies and tracebacks later
    creating = stop_signals_deferred() if backend == "sqlite" else contextlib.nullcontext()
    try:
        with creating:
            storage = _ResilientRDBStorage(url.text, engine_kwargs=engine_kwargs, **extra)
    except (sa.exc.SQLAlchemyError, ImportError, optuna.exceptions.StorageInternalError) as exc:
        raise UsageError(
            database_problem(url, exc)
        ) from None  # StorageInternalError: Optuna's wrapper over SQL errors
    if backend == "postgresql":
        _ping_when_idle(storage.engine)
    if backend == "sqlite":
        _serialize_transactions(storage.engine)
    return storage


def _database_url(url: StorageUrl) -> tuple[StorageUrl, sa.URL]:
    """A SQLite or PostgreSQL URL as SQLAlchemy will connect to it (the value and parsed),
    or a one-line UsageError."""
    url = StorageUrl(url.sqlalchemy)
    try:
        parsed = sa.make_url(url.text)
    except (sa.exc.ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise UsageError(
            f"storage URL {url.redacted!r} is not valid; use sqlite:///PATH or postgresql://USER@HOST:PORT/DB"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "postgresql" and "+" not in parsed.drivername:
        # SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3; we ship psycopg2.
        parsed = parsed.set(drivername="postgresql+psycopg2")
        url = StorageUrl(parsed.render_as_string(hide_password=False))
    if backend not in ("sqlite", "postgresql"):
        raise UsageError(
            f"storage {url.redacted!r}: only sqlite, postgresql and grpc storages are supported"
        )
    return url, parsed


def check_storage(url: StorageUrl | str) -> str:
    """What ``get_storage`` would refuse about ``url``, found without creating anything
    (``hpo validate`` and the checks before ``hpo tune``): the same one-line UsageError.
    Returns a note on the storage for the user."""
    url = StorageUrl.of(url)
    if url.is_grpc:
        get_storage(url)  # waits for the proxy to answer; a client creates nothing
        return f"storage proxy {url}: answers"
    url, parsed = _database_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _check_sqlite_file(url, parsed.database)
    engine = sa.create_engine(
        url.text, poolclass=sa.pool.NullPool, connect_args={"connect_timeout": 10}
    )
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except (sa.exc.SQLAlchemyError, ImportError) as exc:
        raise UsageError(database_problem(url, exc)) from None
    finally:
        engine.dispose()
    return f"storage {url}: reachable"


def holds_studies(url: StorageUrl | str) -> bool:
    """Whether ``url`` already holds Optuna's tables, so that opening it creates nothing (Optuna
    creates them in an empty database): ``hpo validate``'s look for a study of its name. A
    proxy's server made them. Raises ``check_storage``'s one-line UsageError."""
    url = StorageUrl.of(url)
    if url.is_grpc:
        return True
    url, parsed = _database_url(url)
    if parsed.get_backend_name() == "sqlite" and not (
        parsed.database and parsed.database != ":memory:" and Path(parsed.database).exists()
    ):
        return False
    engine = sa.create_engine(url.text, poolclass=sa.pool.NullPool)
    try:
        return sa.inspect(engine).has_table("studies")
    except (sa.exc.SQLAlchemyError, ImportError) as exc:
        raise UsageError(database_problem(url, exc)) from None
    finally:
        engine.dispose()


def _check_sqlite_file(url: StorageUrl, database: str | None) -> str:
    """An existing file opened read-only; else its nearest existing folder can take a file."""
    import sqlite3
    import tempfile

    if not database or database == ":memory:":
        return "storage: SQLite in memory (gone when the process ends)"
    path = Path(database).absolute()
    if path.exists():
        try:
            with contextlib.closing(
                sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
            ) as connection:
                connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            raise UsageError(database_problem(url, exc)) from None
        return f"storage {url}: a SQLite file"
    folder = next(folder for folder in path.parents if folder.exists())
    try:
        if not folder.is_dir():
            raise NotADirectoryError(20, f"{folder} is a file")
        tempfile.TemporaryFile(dir=folder).close()  # unnamed: it leaves nothing behind
    except OSError as exc:
        raise UsageError(
            f"cannot use the database at {url}: cannot create {path}: {exc.strerror}; point "
            "--storage at a writable folder (or set HPO_STORAGE)"
        ) from None
    return f"storage {url}: created with the study"


def _serialize_transactions(engine: sa.Engine) -> None:
    """Each transaction takes SQLite's write lock when it begins (SQLAlchemy's documented
    pysqlite recipe, with IMMEDIATE). The sqlite3 module begins a transaction only at its first
    write, so Optuna's read-then-update claim of a waiting trial (a warm start, a re-queued
    trial) could be read as WAITING by two workers at once, and both ran it."""

    @event.listens_for(engine, "begin")
    def _begin(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


PING_AFTER_IDLE_SECONDS = 1.0


def _ping_when_idle(engine: sa.Engine) -> None:
    """Check a pooled connection before use once it has sat idle (a trial's training), so
    a database restart meanwhile costs a reconnect, not the trial. Hand-written because
    SQLAlchemy's pool_pre_ping pings on every checkout: ~20 round trips in each trial's
    burst of ask, suggest and tell, 4 ms of ~50 at trial 800 (bench P3); a connection
    new or handed back under a second ago is alive. SQLAlchemy's documented recipe: raising
    DisconnectionError at checkout makes the pool replace the connection and retry."""

    @event.listens_for(engine, "connect")
    @event.listens_for(engine, "checkin")
    def _fresh(dbapi_connection, record) -> None:
        record.info["fresh_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_connection, record, proxy) -> None:
        if time.monotonic() - record.info.get("fresh_at", 0.0) < PING_AFTER_IDLE_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise sa.exc.DisconnectionError(f"idle connection is dead: {exc}") from exc


# What a database restart or network cut raises; Optuna wraps some in StorageInternalError.
DATABASE_ERRORS = (
    sa.exc.OperationalError,
    sa.exc.InterfaceError,
    optuna.exceptions.StorageInternalError,
)


def caused_by_database(exc: BaseException) -> bool:
    """True when a database error is anywhere in the exception's chain. Optuna 5.0's
    ``_run_trial`` can turn one into an UnboundLocalError when the database drops twice."""
    return _database_error_in(exc) is not None


def _database_error_in(exc: BaseException) -> BaseException | None:
    return find_cause(exc, lambda seen: isinstance(seen, DATABASE_ERRORS) or _proxy_outage(seen))


def database_error_text(exc: BaseException) -> str:
    """First line of the root cause (psycopg2's message), for one-line logs. The database
    error may sit in the context of another (Optuna 5.0 raises UnboundLocalError over it)."""
    exc = _database_error_in(exc) or exc
    while exc.__cause__ is not None or getattr(exc, "orig", None) is not None:
        exc = getattr(exc, "orig", None) or exc.__cause__
    if _is_grpc_error(exc):
        return f"storage proxy: {exc.code().name} {str(exc.details()).strip()}".splitlines()[0]
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _is_grpc_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("grpc") and callable(getattr(exc, "code", None))


def _proxy_outage(exc: BaseException) -> bool:
    """The storage proxy restarting or unreachable (UNAVAILABLE), or the database behind it
    gone: Optuna's servicer does not catch that, so gRPC reports it as UNKNOWN with its text."""
    if not _is_grpc_error(exc):
        return False
    code = exc.code().name
    return code == "UNAVAILABLE" or (
        code == "UNKNOWN"
        and any(name in str(exc.details()) for name in ("OperationalError", "InterfaceError"))
    )


class _ResilientRDBStorage(OneStatementHeartbeat, RDBStorage):
    """Optuna's RDBStorage with the beat and the stale-trial query of ``OneStatementHeartbeat``
    (one statement each, a missed beat logged and retried)."""


def rdb_backend(storage: optuna.storages.BaseStorage) -> RDBStorage | None:
    """The RDBStorage under Optuna's cache wrapper, for the one-transaction writes and
    counts hand-written here; None behind the gRPC proxy, which has no SQL."""
    backend = uncached(storage)
    return backend if isinstance(backend, RDBStorage) else None


def _grpc_storage(url: StorageUrl, heartbeat: HeartbeatSpec | None) -> GrpcStorageProxy:
    if url.address is None:
        raise UsageError(f"storage {url.redacted!r} must look like grpc://HOST:PORT")
    require_grpc(f"storage {url.redacted!r}")
    host, port = url.address
    if heartbeat:
        storage = _BeatingGrpcStorage(host=host, port=port, heartbeat=heartbeat)
    else:
        storage = GrpcStorageProxy(host=host, port=port)
    try:
        storage.wait_server_ready(timeout=PROXY_CONNECT_SECONDS)
    except ConnectionError:
        raise UsageError(
            f"no storage proxy answers at {url} after {PROXY_CONNECT_SECONDS}s; "
            "start one with `hpo storage-proxy --storage DATABASE_URL`"
        ) from None
    return storage


class _BeatingGrpcStorage(GrpcStorageProxy):
    """The gRPC proxy has no heartbeat table, so a running trial's beat is written through
    it as a trial system attribute (the worker's ``beating`` calls ``record_heartbeat``).
    Only the proxy host judges staleness (one clock, it sees every beat): ``hpo
    storage-proxy`` fails a trial whose beat has stopped changing for ``grace_period`` and
    re-queues it with ``max_retry``. So this is no Optuna heartbeat storage: it is never
    asked for stale trials, rather than answering that there are none."""

    def __init__(self, *, host: str, port: int, heartbeat: HeartbeatSpec):
        super().__init__(host=host, port=port)
        self.heartbeat = heartbeat

    def record_heartbeat(self, trial_id: int) -> None:
        beat = {
            "at": round(time.time(), 3),
            "grace_period": self.heartbeat.grace_period,
            "max_retry": self.heartbeat.max_retry,
        }
        try:
            self.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, beat)
        except Exception as exc:  # proxy restarting, or the trial already failed as stale
            log.warning("heartbeat for trial id %d missed: %s", trial_id, database_error_text(exc))

    def get_heartbeat_interval(self) -> int:
        return self.heartbeat.interval


def require_grpc(what: str) -> None:
    """Optuna imports grpc lazily, deep inside a call; fail first, in one line."""
    try:
        import grpc  # noqa: F401
    except ImportError:
        raise UsageError(f"{what} needs grpcio: pip install 'hpo[proxy]'") from None


INSUFFICIENT_PRIVILEGE = "42501"  # PostgreSQL's SQLSTATE for "permission denied"


def database_problem(url: StorageUrl | str, exc: Exception) -> str:
    """One line for a storage that cannot be used: the driver's reason, no password."""
    url = StorageUrl.of(url)
    driver = find_cause(exc, lambda seen: getattr(seen, "orig", None) is not None)
    reason = driver.orig if driver is not None else exc
    detail = url.mask(str(reason).strip().splitlines()[0])
    if getattr(reason, "pgcode", None) == INSUFFICIENT_PRIVILEGE:
        role = sa.make_url(url.sqlalchemy).username
        return (
            f"role {role!r} may not use the study tables at {url} ({detail}); have their owner "
            f"grant it: GRANT ALL ON SCHEMA public TO {role}; "
            f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}; "
            f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}; "
            "or connect as the role that created them"
        )
    return (
        f"cannot use the database at {url}: {detail}. "
        "Check that it is running and the URL (user, password, host, database) is right, "
        "or pass --storage / set HPO_STORAGE"
    )
