"""The lock a study's trials start under, and are failed and queued again under."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import optuna
import sqlalchemy as sa
from filelock import FileLock
from optuna.storages import RDBStorage

from hpo.study.storage._db_errors import as_storage_error
from hpo.study.storage._optuna_private import study_id, study_storage, uncached

# the PostgreSQL advisory lock trials start under: this first key, the study id second
START_LOCK_CLASS = zlib.crc32(b"hpo trial start") & 0x7FFFFFFF


@contextmanager
def trial_start_lock(study: optuna.Study) -> Iterator[sa.Connection | None]:
    """Held while a worker counts the study's trials and starts one, and while a trial is failed
    and queued again: a count between a failure and its retry saw room for a fresh trial, which
    then took the retry's place (the retry stepped aside as surplus, its configuration dropped).
    Yields the PostgreSQL connection whose transaction holds it, to count on; None elsewhere.
    PostgreSQL: a transaction's advisory lock (released at its end, or with a killed holder's
    connection); SQLite: a file lock beside the database (released by the kernel when its
    holder dies). The gRPC proxy offers neither: there the worker's claim still steps aside."""
    backend = uncached(study_storage(study))
    if not isinstance(backend, RDBStorage) or backend.engine.url.database in (None, "", ":memory:"):
        yield None  # the proxy offers no lock; an in-memory database has one process
    elif backend.engine.dialect.name == "postgresql":
        with backend.engine.begin() as connection:  # its end releases the lock
            with as_storage_error("the trial-start lock"):
                lock = sa.text("SELECT pg_advisory_xact_lock(:c, :s)")
                connection.execute(lock, {"c": START_LOCK_CLASS, "s": study_id(study)})
            yield connection
    else:
        database = Path(backend.engine.url.database)
        with FileLock(database.with_name(f"{database.name}.trial-start.lock")):
            yield None
