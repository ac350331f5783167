"""Process chores every long-running command shares: stopping on signals, following a
launcher out when it dies and waiting for its go, output that may have nowhere to go, and
keeping secrets out of what a process prints."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill/docker stop, terminal closed
HIDDEN_URL = "<storage URL hidden>"
MASK = "***"
_SECRET_KEY = re.compile(r"pass|pwd|secret|token|key", re.IGNORECASE)  # query parameters that carry secrets
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PARENT_POLL_SECONDS = 1.0  # where the kernel cannot signal a parent's death, how often a thread looks
GO = "go\n"  # the line `hpo tune` writes to a waiting worker's stdin once the study exists
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


@contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Inside the block SIGINT, SIGTERM and SIGHUP wait (recorded, not lost); one that came
    meanwhile is raised again as the block ends, so a step that must not be cut in half
    finishes first. Only the main thread may set handlers; elsewhere the block runs unchanged.

    Swaps the Python handlers rather than masking the signals: the kernel hands a process
    signal to any thread that does not block it (Optuna's heartbeat thread, the
    exit-with-parent watcher), and Python then runs the handler in the main thread anyway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: pending.append(signum)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        if pending:
            signal.raise_signal(pending[0])


def await_go() -> bool:
    """Wait for the launcher's go on stdin; False at end of file (its checks failed, or it
    stopped), when there is nothing to do and nothing was touched."""
    return sys.stdin.readline() == GO


def process_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: beyond any PID
        return False
    except PermissionError:  # it exists, and belongs to another user
        return True
    return True


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


def start_child(cmd: Sequence[str], env: Mapping[str, str], **popen) -> subprocess.Popen:
    """Start ``cmd`` in a session of its own: a Ctrl-C in the terminal reaches only us, who
    stop it in order, and ``stop_children`` reaches whatever it started. Call from the main
    thread: the child's ``exit_with_parent`` signal fires when the *thread* that started it ends."""
    return subprocess.Popen(list(cmd), env=dict(env), start_new_session=True, **popen)


def stop_children(procs: Iterable[subprocess.Popen], signum: int, grace_seconds: float) -> None:
    """Send ``signum`` to the process group of each child still running, then SIGKILL the
    groups of those still running ``grace_seconds`` later."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(proc.pid, signum)
    deadline = time.monotonic() + grace_seconds
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


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


@dataclass(frozen=True)
class UrlParts:
    """A storage URL cut where users mean it: userinfo ends at the *last* ``@`` of the
    authority, because a password may hold an unescaped one (``user:p@ss@host``).

    Hand-written because urllib and SQLAlchemy both split at the first ``@``."""

    scheme: str
    user: str
    password: str | None  # None: no ``:`` in the userinfo
    host: str  # host[:port]; the whole authority when there is no userinfo
    path: str  # from the first ``/`` after the authority, query excluded
    query: str

    @classmethod
    def parse(cls, url: str) -> UrlParts | None:
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
        userinfo = "" if not self.user and password is None else (
            f"{self.user}:{password}@" if password is not None else f"{self.user}@")
        query = self.query if query is None else query
        return f"{self.scheme}://{userinfo}{self.host}{self.path}{'?' + query if query else ''}"

    def secret_query(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in parse_qsl(self.query, keep_blank_values=True) if _SECRET_KEY.search(k)]


def redact(url: str, text: str | None = None) -> str:
    """``url`` with its password and any secret query parameter replaced by ***; or, with
    ``text``, that text with every secret of ``url`` masked (error messages quote them).

    Hand-written because SQLAlchemy's masking misses query-string passwords and a
    password holding an unescaped ``@``. A URL that cannot be parsed is hidden whole.
    """
    parts = UrlParts.parse(url)
    if text is not None:
        secrets = [] if parts is None else [parts.password, *(v for _, v in parts.secret_query())]
        for secret in sorted(filter(None, secrets), key=len, reverse=True):
            text = text.replace(secret, MASK)
        return text.replace(url, redact(url)) if url else text
    if parts is None:
        return HIDDEN_URL
    query = None
    if parts.secret_query():
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        query = urlencode([(k, MASK if _SECRET_KEY.search(k) else v) for k, v in pairs], safe="*/:")
    return parts.render(password=MASK if parts.password is not None else None, query=query)
