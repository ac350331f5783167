"""``hpo storage-proxy``: Optuna's gRPC storage proxy in front of the database, plus the
stale-trial sweep that stands in for heartbeats behind it.

Workers started with ``--storage grpc://HOST:PORT`` hold one gRPC channel each instead of
a database pool; this process holds the only pool. Optuna keeps heartbeats in an RDB table
the proxy does not expose, so an hpo worker behind the proxy writes each beat as the
trial system attribute ``hpo:heartbeat`` instead, and this process judges them on its own
clock: a RUNNING trial whose beat has not changed for its grace period is failed and a
WAITING copy with the same parameters is queued (Optuna's
``RetryHeartbeatStaleTrialCallback``). A RUNNING trial that never beat — a client other
than an hpo worker — is failed the same way once it has run ``max_trial_seconds``.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from datetime import datetime
from urllib.parse import urlsplit

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from hpo.errors import UsageError
from hpo.spec import STORAGE_ENV, HeartbeatSpec
from hpo.study import HEARTBEAT_ATTR, database_error_text, get_storage, mask_url

log = logging.getLogger(__name__)

DEFAULT_MAX_RETRY = HeartbeatSpec().max_retry  # for trials that never beat (theirs travels with the beat)
LOOPBACK = ("127.0.0.1", "localhost", "::1")

# {trial id: (last beat seen, time.monotonic() when first seen)}, kept between sweeps.
Beats = dict[int, tuple[object, float]]


def sweep_stale_trials(storage: BaseStorage, max_trial_seconds: float, beats: Beats | None = None,
                       max_retry: int = DEFAULT_MAX_RETRY) -> list[int]:
    """One pass over every study: fail stale RUNNING trials, queue a WAITING copy of each
    with the same parameters, and return the failed trials' ids.

    A trial with a beat is stale once the same beat has been seen for longer than its
    grace period; that takes two passes sharing ``beats``, so a beat is never judged on
    another machine's clock. A trial without one is stale after ``max_trial_seconds``
    (from its start, stamped by the storage on this host)."""
    beats = {} if beats is None else beats
    running: set[int] = set()
    failed = []
    for summary in storage.get_all_studies():
        trials = storage.get_all_trials(summary._study_id, deepcopy=False, states=(TrialState.RUNNING,))
        now, wall = time.monotonic(), datetime.now()  # when these beats were read, not when the pass began
        for trial in trials:
            running.add(trial._trial_id)
            beat = trial.system_attrs.get(HEARTBEAT_ATTR)
            if beat is None:
                age = (wall - trial.datetime_start).total_seconds() if trial.datetime_start else 0.0
                if age <= max_trial_seconds:
                    continue
                why = f"no heartbeat, running {age:.0f}s > {max_trial_seconds:g}s"
            else:
                seen = beats.get(trial._trial_id)
                if seen is None or seen[0] != beat:
                    beats[trial._trial_id] = (beat, now)
                    continue
                grace = float(beat.get("grace_period", 0)) if isinstance(beat, dict) else 0.0
                if now - seen[1] <= grace:
                    continue
                why = f"no heartbeat for {now - seen[1]:.0f}s > grace_period {grace:g}s"
            if _fail_and_requeue(storage, summary.study_name, trial, why, _max_retry(beat, max_retry)):
                failed.append(trial._trial_id)
                running.discard(trial._trial_id)
    for gone in set(beats) - running:
        del beats[gone]
    return failed


def _max_retry(beat: object, default: int) -> int:
    return int(beat.get("max_retry", default)) if isinstance(beat, dict) else default


def _fail_and_requeue(storage: BaseStorage, study_name: str, trial: FrozenTrial, why: str, max_retry: int) -> bool:
    try:
        if not storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
            return False
    except UpdateFinishedTrialError:  # it finished (or a worker failed it) since we looked
        return False
    failed = storage.get_trial(trial._trial_id)
    retries = len(failed.system_attrs.get("retry_history", []))
    study = optuna.load_study(study_name=study_name, storage=storage)
    RetryHeartbeatStaleTrialCallback(max_retry=max_retry)(study, failed)
    what = "re-queued with the same parameters" if retries < max_retry else f"not re-queued: max_retry={max_retry} reached"
    log.warning("study %s: trial %d failed as stale (%s); %s", study_name, trial.number, why, what)
    return True


def _sweep_forever(storage: BaseStorage, every: float, max_trial_seconds: float, url: str,
                   stop: threading.Event) -> None:
    beats: Beats = {}
    while True:
        try:
            sweep_stale_trials(storage, max_trial_seconds, beats)
        except Exception as exc:  # a database outage must not end the sweeping
            log.warning("stale-trial sweep skipped: %s", _without_password(database_error_text(exc), url))
        if stop.wait(every):
            return


def _without_password(text: str, url: str) -> str:
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text


def serve(url: str | None, host: str, port: int, sweep_seconds: float, max_trial_seconds: float) -> None:
    """Run the proxy until Ctrl-C, sweeping stale trials every ``sweep_seconds`` (0: never)."""
    url = url or os.environ.get(STORAGE_ENV)
    if not url or url.startswith("grpc://"):
        raise UsageError("storage-proxy needs the database: --storage postgresql://USER@HOST:PORT/DB "
                         f"(or $HPO_STORAGE){f', not {mask_url(url)}' if url else ''}")
    if sweep_seconds < 0 or max_trial_seconds <= 0:
        raise UsageError("--sweep-seconds must be >= 0 and --max-trial-seconds > 0")
    try:
        import grpc  # noqa: F401  (Optuna imports it lazily)
    except ImportError:
        raise UsageError("storage-proxy needs grpcio: pip install 'hpo[proxy]'") from None
    _check_port_free(host, port)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [storage-proxy] %(message)s", stream=sys.stdout)
    # Optuna's advice for the proxy: its cached storage, which reads only new or running trials.
    storage = optuna.storages.get_storage(get_storage(url))
    stop = threading.Event()
    if sweep_seconds:
        threading.Thread(target=_sweep_forever, args=(storage, sweep_seconds, max_trial_seconds, url, stop),
                         name="stale-trial-sweep", daemon=True).start()
    sweep = (f"stale trials swept every {sweep_seconds:g}s" if sweep_seconds
             else "no stale-trial sweep: a dead worker's trial stays RUNNING")
    print(f"storage proxy for {mask_url(url)} starting on grpc://{host}:{port} ({sweep}); Ctrl-C stops it",
          flush=True)
    if host not in LOOPBACK:
        print(f"warning: the proxy has no authentication or TLS: anyone who reaches {host}:{port} "
              "can read and change every study", flush=True)
    if threading.current_thread() is threading.main_thread():
        # Ctrl-C and SIGTERM (docker stop, systemd) end it; set explicitly, as a process
        # started in the background inherits SIGINT ignored.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.default_int_handler)
    try:
        optuna.storages.run_grpc_proxy_server(storage, host=host, port=port)
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
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
                         "is another proxy running there? pick another --port") from None
