"""A hand-written query's database error, raised as Optuna's own storage calls raise theirs.

Optuna turns every SQLAlchemy error in its sessions into a ``StorageInternalError``, which the
workers and the launcher ride out (a restart, a revoked privilege, a dropped table alike). The
census, the beat and the stale-trial sweep query the database themselves; without this a
ProgrammingError from one of them ended `hpo tune` or a worker where Optuna's would have been
waited out. A leaf module: ``_storage`` imports the heartbeat, which needs this.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import optuna
import sqlalchemy as sa


@contextmanager
def as_storage_error(what: str) -> Iterator[None]:
    """Raise a database error in the block as ``StorageInternalError`` (from it); ``what`` names
    the query in its message."""
    try:
        yield
    except sa.exc.SQLAlchemyError as exc:
        raise optuna.exceptions.StorageInternalError(
            f"{what} failed: {type(exc).__name__}"
        ) from exc
