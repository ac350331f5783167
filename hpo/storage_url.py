"""A storage URL: where a study lives, parsed once, and never printed with its password.

``StorageUrl`` is the one value that crosses from the spec and the command line to the
study, the launcher and Slurm: resolved by precedence (``resolve``), asked what it is
(``is_sqlite``, ``is_grpc``, ``is_shared``), shown without secrets (``str()``,
``redacted``, ``mask``) and handed to SQLAlchemy with a password it will read as users
mean it (``sqlalchemy``). ``text`` is the URL as given, secrets included: only for the
storage itself and a child's environment, never for a message.

A plain module, not part of ``hpo.study``: the spec resolves the storage and must load
without Optuna, and importing anything under ``hpo.study`` runs its ``__init__``, which
imports Optuna (and the spec: a circular import).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

DEFAULT = "sqlite:///_runs/hpo.db"  # embedded default: one machine, a few workers
ENV = "HPO_STORAGE"  # the storage URL from the environment: beats the spec, loses to --storage
# what is shown of a URL that cannot be parsed: all of it may be secret
HIDDEN = "<storage URL hidden>"
MASK = "***"
# query parameters that carry secrets
_SECRET_KEY = re.compile(r"pass|pwd|secret|token|key", re.IGNORECASE)


@dataclass(frozen=True)
class _Parts:
    """A URL cut where users mean it: userinfo ends at the *last* ``@`` of the authority,
    because a password may hold an unescaped one (``user:p@ss@host``). Hand-written
    because urllib and SQLAlchemy both split at the first ``@``."""

    scheme: str
    user: str
    password: str | None  # None: no ``:`` in the userinfo
    host: str  # host[:port]; the whole authority when there is no userinfo
    path: str  # from the first ``/`` after the authority, query excluded
    query: str

    @classmethod
    def parse(cls, url: str) -> _Parts | None:
        """None when ``url`` is no URL we can read."""
        scheme, sep, rest = url.partition("://")
        if not sep:
            return None
        authority, slash, tail = rest.partition("/")
        path, _, query = tail.partition("?")
        userinfo, at, host = authority.rpartition("@")
        user, colon, password = userinfo.partition(":") if at else ("", "", "")
        return cls(scheme, user, password if colon else None, host, slash + path, query)

    def render(self, password: str | None = None, query: str | None = None) -> str:
        """The URL again, with ``password`` and ``query`` replaced when given."""
        password = self.password if password is None else password
        userinfo = (
            ""
            if not self.user and password is None
            else (f"{self.user}:{password}@" if password is not None else f"{self.user}@")
        )
        query = self.query if query is None else query
        return f"{self.scheme}://{userinfo}{self.host}{self.path}{'?' + query if query else ''}"

    def secrets(self) -> list[str]:
        """The password and every secret query value, longest first (a shorter one may be inside
        it)."""
        found = [self.password, *(value for key, value in self._pairs() if _SECRET_KEY.search(key))]
        return sorted(filter(None, found), key=len, reverse=True)

    def masked_query(self) -> str | None:
        """The query with its secret values masked; None when it holds none."""
        pairs = self._pairs()
        if not any(_SECRET_KEY.search(key) for key, _ in pairs):
            return None
        return urlencode(
            [(key, MASK if _SECRET_KEY.search(key) else value) for key, value in pairs], safe="*/:"
        )

    def _pairs(self) -> list[tuple[str, str]]:
        return parse_qsl(self.query, keep_blank_values=True)


@dataclass(frozen=True)
class StorageUrl:
    """A study's storage: ``sqlite:///PATH``, ``postgresql[+driver]://USER[:PASSWORD]@HOST[:PORT]/DB``
    or ``grpc://HOST:PORT`` (Optuna's storage proxy, ``hpo storage-proxy``).

    Any text is accepted: whether the storage can be used is ``hpo.study``'s question
    (``check_storage``, ``get_storage``), answered in one line that shows ``redacted``."""

    # as given, secrets included: for the storage and a child's environment only
    text: str = field(repr=False)
    _parts: _Parts | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"a storage URL is text, not {type(self.text).__name__}")
        object.__setattr__(self, "_parts", _Parts.parse(self.text))

    @classmethod
    def of(cls, url: StorageUrl | str) -> StorageUrl:
        """``url`` as a StorageUrl (the one normalisation of every caller's input)."""
        return url if isinstance(url, StorageUrl) else cls(url)

    @classmethod
    def resolve(
        cls,
        flag: StorageUrl | str | None,
        from_spec: str | None = None,
        env: Mapping[str, str] | None = None,
        default: str | None = DEFAULT,
    ) -> StorageUrl | None:
        """The storage by precedence: ``--storage``, then ``$HPO_STORAGE``, then the spec, then
        ``default`` (None: no storage named anywhere)."""
        env = os.environ if env is None else env
        chosen = flag or env.get(ENV) or from_spec or default
        return None if chosen is None else cls.of(chosen)

    @property
    def scheme(self) -> str:
        """``sqlite``, ``postgresql+psycopg2``, ``grpc``…; empty for text that is no URL."""
        return self._parts.scheme.lower() if self._parts else ""

    @property
    def backend(self) -> str:
        """The scheme without its driver: ``sqlite``, ``postgresql``, ``grpc``…"""
        return self.scheme.partition("+")[0]

    @property
    def is_sqlite(self) -> bool:
        return self.backend == "sqlite"

    @property
    def is_grpc(self) -> bool:
        """Optuna's gRPC storage proxy, not a database: no SQL, no heartbeat table."""
        return self.backend == "grpc"

    @property
    def is_shared(self) -> bool:
        """Whether workers on several machines can share it: a database server or the proxy,
        not a SQLite file (its lock does not hold across machines)."""
        return self.backend in ("postgresql", "grpc")

    @property
    def address(self) -> tuple[str, int] | None:
        """``(host, port)`` of a server URL; None where it names no host or no valid port."""
        try:
            split = urlsplit(self.text)
            return (split.hostname, split.port) if split.hostname and split.port else None
        except ValueError:  # a port that is no number
            return None

    @property
    def holds_secrets(self) -> bool:
        """Whether the URL carries a password or a secret query value (a path does not)."""
        return bool(self._parts and self._parts.secrets())

    @property
    def redacted(self) -> str:
        """The URL with its password and every secret query parameter shown as ***; a URL
        that cannot be parsed is hidden whole. Hand-written because SQLAlchemy's masking
        misses query-string passwords and a password holding an unescaped ``@``."""
        if self._parts is None:
            return HIDDEN
        return self._parts.render(
            password=MASK if self._parts.password is not None else None,
            query=self._parts.masked_query(),
        )

    def mask(self, text: str) -> str:
        """``text`` (a driver's error message, a command's output) with every secret of this
        URL masked, and the URL itself shown redacted."""
        for secret in self._parts.secrets() if self._parts else []:
            text = text.replace(secret, MASK)
        return text.replace(self.text, self.redacted) if self.text else text

    @property
    def sqlalchemy(self) -> str:
        """The URL as SQLAlchemy must be given it: a password holding an unescaped ``@``
        (``user:p@ss@host``, as users write it) percent-quoted, since SQLAlchemy splits at
        the first ``@`` and would send part of the password as the host name."""
        parts = self._parts
        if parts is None or not parts.password or "@" not in parts.password:
            return self.text
        return parts.render(password=quote(parts.password, safe=""))

    def __str__(self) -> str:
        """Safe to log and print: the redacted form."""
        return self.redacted

    def __repr__(self) -> str:
        return f"StorageUrl({self.redacted!r})"


def redact(url: StorageUrl | str, text: str | None = None) -> str:
    """Any URL (a storage, an MLflow tracking URI, a command-line argument) with its secrets
    masked; or, with ``text``, that text with them masked. ``StorageUrl.redacted`` and
    ``StorageUrl.mask`` for text that may be no URL at all."""
    url = StorageUrl.of(url)
    return url.redacted if text is None else url.mask(text)


__all__ = ["DEFAULT", "ENV", "HIDDEN", "MASK", "StorageUrl", "redact"]
