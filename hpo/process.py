"""Process chores every long-running command shares: stopping on signals, following a
launcher out when it dies, output that may have nowhere to go, and keeping secrets out
of what a process prints."""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill/docker stop, terminal closed
HIDDEN_URL = "<storage URL hidden>"
MASK = "***"
_SECRET_KEY = re.compile(r"pass|pwd|secret|token|key", re.IGNORECASE)  # query parameters that carry secrets
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PARENT_POLL_SECONDS = 1.0  # where the kernel cannot signal a parent's death, how often a thread looks
LOST_OUTPUT = (errno.EIO, errno.EPIPE)  # the terminal was closed; whoever read our pipe went away


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside the block the first SIGINT, SIGTERM or SIGHUP raises KeyboardInterrupt, so
    the code that catches it runs its clean-up (re-queueing a running trial, stopping
    workers). Later ones are ignored until the block ends: a second Ctrl-C, or the death
    signal of a launcher that exits meanwhile, must not cut that clean-up short. Each
    clean-up is bounded (a worker's database calls time out; a launcher SIGKILLs workers
    that linger).

    Set explicitly: a process started in the background inherits SIGINT ignored. Only
    the main thread may set handlers; elsewhere the block runs unchanged. The caller's
    handlers are back once the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def exit_with_parent(pid: int) -> None:
    """Send this process SIGTERM when process ``pid``, its parent (the ``hpo tune`` that
    started it), exits: killed with -9, or gone with its closed terminal. A worker then
    stops as SIGTERM stops it, re-queueing its running trial, instead of running on
    unsupervised in its own session.

    On Linux the kernel sends it (PR_SET_PDEATHSIG; it fires when the *thread* that
    started this process ends, so the launcher starts workers from its main thread);
    elsewhere a daemon thread polls the parent's PID. The parent may have died before
    this ran: then the signal comes at once.
    """
    if not _parent_death_signal(signal.SIGTERM):
        _watch_parent(pid)
    if os.getppid() != pid:  # already orphaned (adopted by init or a subreaper)
        os.kill(os.getpid(), signal.SIGTERM)


def _parent_death_signal(sig: signal.Signals) -> bool:
    """Ask the kernel to send ``sig`` when our parent dies; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the C library this Python runs on
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl in this C library
        return False


def _watch_parent(pid: int, poll_seconds: float = PARENT_POLL_SECONDS) -> None:
    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(poll_seconds)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


@contextmanager
def output_may_be_gone() -> Iterator[None]:
    """A write inside the block that fails because the terminal was closed (EIO) or the
    reader of our pipe went away (EPIPE) is dropped, and stdout and stderr then go to
    /dev/null, so later writes and the flush at exit succeed too. A launcher whose
    terminal window closed must still stop its workers; what it prints is a courtesy.
    """
    try:
        yield
    except OSError as exc:
        if exc.errno not in LOST_OUTPUT:
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)


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
