"""One ``hpo finalize`` per study at a time, on every storage, released when its holder dies.

PostgreSQL: a session advisory lock keyed by the study's id, on a connection of its own, so
finalizes on different machines exclude each other. The server releases it when that
connection ends: at once for a killed process, within about two minutes (TCP keepalives)
for a machine that vanished. SQLite, which only one machine can share: a file lock beside
the database, released by the kernel when its holder dies. The gRPC proxy offers neither:
a file lock in the study's output folder excludes finalizes on one machine. A lock file is
removed when its holder ends (normally, on an error, on Ctrl-C); one killed with -9 leaves it
behind, unlocked, for the next finalize to take and remove.
"""

from __future__ import annotations

import os
import socket
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path

import optuna
import sqlalchemy as sa
from filelock import FileLock, Timeout

from hpo.errors import StudyBusy
from hpo.study.storage._connect import rdb_backend
from hpo.study.storage._optuna_private import study_id, study_storage

# the advisory lock's first key; the study id is the second
LOCK_CLASS = zlib.crc32(b"hpo finalize") & 0x7FFFFFFF
# The server probes an idle lock connection after 30 s and drops it after 9 unanswered probes
# 10 s apart.
KEEPALIVES = "-c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=9"
_HOLDER = sa.text("""
    SELECT a.application_name, a.backend_start FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.classid = CAST(:c AS oid) AND l.objid = CAST(:s AS oid)
      AND l.objsubid = 2 AND l.granted""")  # noqa: E501
_MINE = sa.text("""
    SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
                   AND classid = CAST(:c AS oid) AND objid = CAST(:s AS oid) AND objsubid = 2 AND granted)""")  # noqa: E501


class _AdvisoryLock:
    def __init__(self, engine: sa.Engine, study_id: int, holder: str):
        self.keys = {"c": LOCK_CLASS, "s": study_id}
        # Its own connection, outside the storage's pool: closing it is what releases the lock.
        self.engine = sa.create_engine(
            engine.url,
            poolclass=sa.pool.NullPool,
            isolation_level="AUTOCOMMIT",
            connect_args={
                "connect_timeout": 10,
                "application_name": holder[:63],
                "options": KEEPALIVES,
            },
        )
        self.connection: sa.Connection | None = None

    def acquire(self) -> bool:
        connection = self.engine.connect()
        if connection.execute(sa.text("SELECT pg_try_advisory_lock(:c, :s)"), self.keys).scalar():
            self.connection = connection
            return True
        connection.close()
        return False

    def held(self) -> bool:
        try:
            return bool(self.connection and self.connection.execute(_MINE, self.keys).scalar())
        except (
            sa.exc.DBAPIError
        ):  # the connection died (a database restart): the server let the lock go
            return False

    def holder(self) -> str:
        with self.engine.connect() as connection:
            row = connection.execute(_HOLDER, self.keys).first()
        if row is None or not row.application_name:
            return "another process"
        return (
            f"{row.application_name} "
            f"(since {row.backend_start.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC)"
        )

    def release(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        self.engine.dispose()


class _FileLock:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.lock = path, FileLock(path)

    def acquire(self) -> bool:
        try:
            self.lock.acquire(timeout=0)
        except Timeout:
            return False
        return True

    def held(self) -> bool:
        return self.lock.is_locked

    def holder(self) -> str:
        return f"another process on this machine (it holds {self.path})"

    def release(self) -> None:
        # The file goes when its holder ends, and only while it still holds it: filelock
        # refuses a lock taken on an inode that is no longer linked (st_nlink 0), so a
        # process that opened this file before the unlink cannot take it afterwards and run
        # beside a process that takes the new file. Unlinking after releasing (or the
        # release of a lock we never held) would delete a file another process holds.
        if self.lock.is_locked:
            self.path.unlink(missing_ok=True)
        self.lock.release()


class StudyLock:
    """Held by the ``with study_lock(...)`` block that made it."""

    def __init__(self, lock: _AdvisoryLock | _FileLock, study: optuna.Study, job: str):
        self._lock, self._study, self._job = lock, study, job

    def confirm(self) -> None:
        """Before a step that must run once (scoring the test split): make sure the lock is
        still ours. A database restart ends the lock's connection; then take it again, or
        raise StudyBusy when another process took it meanwhile."""
        if not self._lock.held():
            self._lock.release()
            if not self._lock.acquire():
                raise StudyBusy(
                    f"study {self._study.study_name!r}: the {self._job} lock was lost "
                    f"(the database restarted?) and {self._lock.holder()} took it; "
                    "its result will be the study's"
                )


@contextmanager
def study_lock(study: optuna.Study, job: str, folder: Path) -> Iterator[StudyLock]:
    """Hold ``study`` for ``job`` (e.g. "finalize") until the block ends, or raise StudyBusy
    naming the holder. ``folder`` (the study's output folder) holds the lock file where the
    storage cannot lock (the gRPC proxy)."""
    holder = f"hpo {job} {socket.gethostname()}/{os.getpid()}"
    backend = rdb_backend(study_storage(study))
    if backend is None:
        lock: _AdvisoryLock | _FileLock = _FileLock(folder / f"{job}.lock")
    elif backend.engine.dialect.name == "postgresql":
        lock = _AdvisoryLock(backend.engine, study_id(study), holder)
    else:
        lock = _FileLock(
            Path(backend.engine.url.database).with_name(
                f"{Path(backend.engine.url.database).name}.{job}-{study_id(study)}.lock"
            )
        )
    if not lock.acquire():
        who = lock.holder()
        lock.release()
        raise StudyBusy(
            f"study {study.study_name!r} is being {job}d by {who}; wait for it to end, then run "
            f"hpo {job} again"
        )
    try:
        yield StudyLock(lock, study, job)
    finally:
        lock.release()
