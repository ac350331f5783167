"""A database error in words: what the database said, and what to do about the cases a user can
fix (a privilege revoked) or must be told the truth about (the database or its tables dropped).

The launcher and the workers ride out every database error alike (Optuna turns each one into a
StorageInternalError, and the census does the same); this is what they say while they wait and
when they give up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import optuna

from hpo.study.storage._connect import database_error_text, rdb_backend
from hpo.study.storage._optuna_private import study_storage

# PostgreSQL's SQLSTATE codes (psycopg2's ``pgcode``); a refused connection carries none, so
# the text is matched too (SQLite's words included)
_NO_PRIVILEGE = "42501"
_NO_TABLE = "42P01"
_NO_DATABASE = "3D000"
_DATABASE_GONE = re.compile(r'database "[^"]*" does not exist')
_TABLE_GONE = re.compile(r'relation "[^"]*" does not exist|no such table')


@dataclass(frozen=True)
class DatabaseProblem:
    said: str  # the database's own first line
    kind: str  # "unreachable", "refused", "gone"
    fix: str | None = None

    @property
    def gone(self) -> bool:
        """The study's data is not there any more: waiting for the database will not bring it
        back."""
        return self.kind == "gone"

    def __str__(self) -> str:
        what = {
            "unreachable": "database unreachable",
            "refused": "the database refuses the study's queries",
            "gone": "the study's database is gone",
        }[self.kind]
        return f"{what} ({self.said})" + (f": {self.fix}" if self.fix else "")


def database_problem(study: optuna.Study | None, exc: BaseException) -> DatabaseProblem:
    """What ``exc`` (a database error somewhere in its chain) means for ``study`` (None: one
    not opened yet)."""
    said = database_error_text(exc)
    code = _pgcode(exc)
    if code == _NO_PRIVILEGE or "permission denied" in said:
        role = _role(study)
        return DatabaseProblem(
            said,
            "refused",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role} "
            "(and USAGE, SELECT ON ALL SEQUENCES)",
        )
    if code in (_NO_DATABASE, _NO_TABLE) or _DATABASE_GONE.search(said) or _TABLE_GONE.search(said):
        return DatabaseProblem(
            said,
            "gone",
            "it was dropped or renamed, and the study's trials with it unless it is restored "
            "from a backup",
        )
    return DatabaseProblem(said, "unreachable")


def _pgcode(exc: BaseException) -> str | None:
    seen: BaseException | None = exc
    while seen is not None:
        if code := getattr(seen, "pgcode", None):
            return code
        seen = getattr(seen, "orig", None) or seen.__cause__ or seen.__context__
    return None


def _role(study: optuna.Study | None) -> str:
    """The storage URL's user (never its password), or a description where it is not known
    (behind the storage proxy, or before the study is open)."""
    backend = rdb_backend(study_storage(study)) if study is not None else None
    username = backend.engine.url.username if backend is not None else None
    return username or "the storage URL's user"
