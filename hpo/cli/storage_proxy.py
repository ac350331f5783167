"""``hpo storage-proxy``: Optuna's gRPC storage proxy in front of the database, with the
stale-trial sweep (``hpo/run/proxy.py``); workers use ``--storage grpc://HOST:PORT``."""

from __future__ import annotations

import argparse
import math

from hpo.cli._common import _port

WEEK = 7 * 86400  # a sweep or trial limit past a week is a typo, and inf broke the sweep thread


def _seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or not 0 <= value <= WEEK:
        raise argparse.ArgumentTypeError(f"must be seconds from 0 to {WEEK} (a week), got {text}")
    return value


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "storage-proxy",
        help="Optuna's gRPC storage proxy in front of the database, "
        "with a stale-trial sweep (workers use --storage grpc://HOST:PORT)",
    )
    parser.add_argument(
        "--storage", help="the database URL (default $HPO_STORAGE); postgresql://… or sqlite:///…"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    parser.add_argument("--port", type=_port, default=13000)
    parser.add_argument(
        "--sweep-seconds",
        type=_seconds,
        default=30,
        help="how often to fail and re-queue stale RUNNING trials (default 30; 0: never)",
    )
    parser.add_argument(
        "--max-trial-seconds",
        type=_seconds,
        default=86400,
        help="a RUNNING trial without heartbeats (a client other than hpo) is stale after this "
        "(default 86400)",
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.run.proxy import serve

    serve(args.storage, args.host, args.port, args.sweep_seconds, args.max_trial_seconds)
    return 0
