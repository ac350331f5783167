"""Process chores every long-running command shares: stopping on signals, and keeping
secrets out of what a process prints."""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill/docker stop, terminal closed
HIDDEN_URL = "<storage URL hidden>"
MASK = "***"
_SECRET_KEY = re.compile(r"pass|pwd|secret|token|key", re.IGNORECASE)  # query parameters that carry secrets


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside the block SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt, so the code
    that catches it runs its clean-up (re-queueing a running trial, stopping workers).

    Set explicitly: a process started in the background inherits SIGINT ignored. Only
    the main thread may set handlers; elsewhere the block runs unchanged. The caller's
    handlers are back once the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.default_int_handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def redact(url: str, text: str | None = None) -> str:
    """``url`` with its password and any secret query parameter replaced by ***; or, with
    ``text``, that text with every secret of ``url`` masked (error messages quote them).

    Hand-written because SQLAlchemy's masking misses query-string passwords and a
    password holding an unescaped ``@``. A URL that cannot be parsed is hidden whole.
    """
    secrets = _secrets(url)
    if text is not None:
        for secret in sorted(filter(None, secrets or ()), key=len, reverse=True):
            text = text.replace(secret, MASK)
        return text.replace(url, redact(url)) if url else text
    if secrets is None:
        return HIDDEN_URL
    scheme, _, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        userinfo, _, host = authority.rpartition("@")  # the last @: a password may hold one unescaped
        user, colon, _ = userinfo.partition(":")
        authority = f"{user}:{MASK}@{host}" if colon else authority
    path, question, query = tail.partition("?")
    if question:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if _SECRET_KEY.search(k) else v) for k, v in pairs], safe="*/:")
    return f"{scheme}://{authority}{slash}{path}{question}{query}"


def _secrets(url: str) -> list[str] | None:
    """The password and secret query values in ``url``; None when it is no URL we can read."""
    if "://" not in url:
        return None
    try:
        rest = url.partition("://")[2]
        authority = rest.partition("/")[0]
        secrets = []
        if "@" in authority:
            userinfo = authority.rpartition("@")[0]
            if ":" in userinfo:
                secrets.append(userinfo.partition(":")[2])
        query = urlsplit(url).query
        secrets += [v for k, v in parse_qsl(query, keep_blank_values=True) if _SECRET_KEY.search(k)]
        return secrets
    except ValueError:
        return None
