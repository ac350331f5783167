"""``hpo storage-proxy``: Optuna's gRPC storage proxy in front of the database, plus the
stale-trial sweep that stands in for heartbeats behind it (see ``hpo.study._proxy``).

Workers started with ``--storage grpc://HOST:PORT`` hold one gRPC channel each instead of
a database pool; this process holds the only pool.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading

from hpo.errors import UsageError
from hpo.process import interruptible
from hpo.storage_url import StorageUrl
from hpo.study import proxy_storage, run_proxy_server, sweep_stale_trials
from hpo.study.storage import database_error_text, require_grpc

log = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _sweep_forever(
    storage, every: float, max_trial_seconds: float, url: StorageUrl, stop: threading.Event
) -> None:
    beats: dict = {}
    while True:
        try:
            sweep_stale_trials(storage, max_trial_seconds, beats)
        except Exception as exc:  # a database outage must not end the sweeping
            log.warning("stale-trial sweep skipped: %s", url.mask(database_error_text(exc)))
        if stop.wait(every):
            return


def serve(
    url: StorageUrl | str | None,
    host: str,
    port: int,
    sweep_seconds: float,
    max_trial_seconds: float,
) -> None:
    """Run the proxy until Ctrl-C, sweeping stale trials every ``sweep_seconds`` (0: never)."""
    url = StorageUrl.resolve(url, default=None)
    if url is None or url.is_grpc:
        raise UsageError(
            "storage-proxy needs the database: --storage postgresql://USER@HOST:PORT/DB "
            f"(or $HPO_STORAGE){f', not {url}' if url else ''}"
        )
    if sweep_seconds < 0 or max_trial_seconds <= 0:
        raise UsageError("--sweep-seconds must be >= 0 and --max-trial-seconds > 0")
    require_grpc("storage-proxy")
    _check_port_free(host, port)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s [storage-proxy] %(message)s", stream=sys.stdout
    )
    storage = proxy_storage(url)
    stop = threading.Event()
    if sweep_seconds:
        threading.Thread(
            target=_sweep_forever,
            args=(storage, sweep_seconds, max_trial_seconds, url, stop),
            name="stale-trial-sweep",
            daemon=True,
        ).start()
    sweep = (
        f"stale trials swept every {sweep_seconds:g}s"
        if sweep_seconds
        else "no stale-trial sweep: a dead worker's trial stays RUNNING"
    )
    print(
        f"storage proxy for {url} starting on grpc://{host}:{port} ({sweep}); Ctrl-C stops it",
        flush=True,
    )
    if host not in LOOPBACK:
        print(
            f"warning: the proxy has no authentication or TLS: anyone who reaches {host}:{port} "
            "can read and change every study",
            flush=True,
        )
    try:
        with interruptible():  # Ctrl-C, SIGTERM (docker stop, systemd) and SIGHUP end it
            run_proxy_server(storage, host=host, port=port)
    except RuntimeError as exc:  # grpc: "Failed to bind to address"
        raise UsageError(f"cannot listen on {host}:{port}: {exc}") from None
    finally:
        stop.set()


def _check_port_free(host: str, port: int) -> None:
    """gRPC binds with SO_REUSEPORT, so a second proxy on a busy port would start silently
    and share its connections with the first; a plain bind refuses."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.bind((host, port))
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
            "is another proxy running there? pick another --port"
        ) from None
