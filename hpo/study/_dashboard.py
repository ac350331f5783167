"""optuna-dashboard over a storage, with the artifact store the trials upload to."""

from __future__ import annotations

import errno
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from hpo.errors import UsageError
from hpo.storage_url import StorageUrl
from hpo.study.records._find import sqlite_file_exists
from hpo.study.storage._connect import get_storage


class _Server(ThreadingMixIn, WSGIServer):
    """wsgiref's server, one thread per request (as optuna-dashboard's own CLI serves)."""

    daemon_threads = True


def serve_dashboard(
    url: StorageUrl | str, artifact_dir: Path, host: str, port: int, ready: Callable[[], None]
) -> None:
    """Bind ``host:port`` first, so a busy port or a foreign host is one line naming it and
    nothing is created; a SQLite file that does not exist (a mistyped path) is refused, not
    created empty; then open the storage, call ``ready`` (the "listening" line) and
    serve until Ctrl-C. optuna-dashboard is an optional extra, imported only here."""
    from optuna.artifacts import FileSystemArtifactStore
    from optuna_dashboard import wsgi

    server = _bind(host, port)
    try:
        if not sqlite_file_exists(StorageUrl.of(url)):  # opening it would create an empty one
            raise UsageError(
                f"no database at {url}: the file does not exist; check the path, or start the "
                "study first (hpo tune creates it)"
            )
        artifact_dir.mkdir(parents=True, exist_ok=True)
        server.set_app(
            wsgi(get_storage(url), artifact_store=FileSystemArtifactStore(str(artifact_dir)))
        )
        ready()
        # the line is out before anyone can connect: scripts wait for the port, then read it
        sys.stdout.flush()
        server.server_activate()  # listen
        server.serve_forever()
    finally:
        server.server_close()


def _bind(host: str, port: int) -> _Server:
    server_class = (
        type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
        if ":" in host
        else _Server
    )
    server = server_class((host, port), WSGIRequestHandler, bind_and_activate=False)
    try:
        server.server_bind()
        return server
    except socket.gaierror as exc:
        server.server_close()
        raise UsageError(
            f"cannot listen on host {host}: unknown host name ({exc.strerror}); "
            "pass --host 127.0.0.1 (this machine only) or an address of this machine"
        ) from None
    except OSError as exc:
        server.server_close()
        raise UsageError(_bind_problem(host, port, exc)) from None


def _bind_problem(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is busy: another program (another dashboard?) listens there; "
            f"pass --port with a free port, e.g. --port {port + 1 if port < 65535 else 8080}"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on host {host}: not an address of this machine; pass --host 127.0.0.1 "
            "(this machine only) or 0.0.0.0 (every interface)"
        )
    if exc.errno == errno.EACCES:
        return (
            f"cannot listen on port {port}: ports below 1024 need root; pass --port 1024 or above, "
            "e.g. --port 8080"
        )
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}; pass another --host or --port"
