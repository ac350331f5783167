"""``hpo worker``: one worker on a study, here or on another machine; ``hpo tune`` starts its
own as ``python -m hpo worker ... --parent-pid PID --await-go``."""

from __future__ import annotations

import logging

from hpo.cli._common import (
    _memory_mb,
    _positive_int,
    _thread_count,
    add_spec_args,
    add_spec_change_arg,
)

log = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "worker", help="run one worker on a study (e.g. on another machine)"
    )
    add_spec_args(parser)
    parser.add_argument(
        "--name", help="worker name in logs and trial attributes (default host/pid)"
    )
    parser.add_argument("--threads", type=_thread_count, help="torch CPU threads for this worker")
    add_spec_change_arg(parser)
    parser.add_argument(
        "--parent-pid",
        type=_positive_int,
        metavar="PID",
        help="stop (re-queueing the running trial) when process PID exits; hpo tune passes its own",
    )
    parser.add_argument(
        "--memory-limit",
        type=_memory_mb,
        metavar="SIZE",
        help="host-memory ceiling of this worker, e.g. 6G (default: 90%% of this machine's memory)",
    )
    parser.add_argument(
        "--await-go",
        action="store_true",
        help="load the libraries, then start only once a line 'go' arrives on stdin (hpo tune "
        "sends it)",
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    """One worker process: its thread budget is applied here, once, for the whole process.
    Started by ``hpo tune`` (``--parent-pid``), it stops as SIGTERM stops it when the launcher
    dies; with ``--await-go`` it loads its libraries, then waits for the launcher's go on stdin."""
    import os
    import socket
    import sys

    from hpo.errors import UsageError
    from hpo.process import await_go, process_exists
    from hpo.run.capacity import check_capacity
    from hpo.train.child import ChildContract
    from hpo.train.memory import machine_memory_mb

    if args.memory_limit is not None:  # a ceiling too small to work in, or past the machine's
        check_capacity(
            1,
            cpus=1,
            memory_mb=args.memory_limit,
            machine_mb=machine_memory_mb(),
            memory_given=True,
            memory_flag="--memory-limit",
        )
    if args.parent_pid and not process_exists(args.parent_pid):
        # a mistyped PID, or a launcher already gone: nothing to follow
        raise UsageError(
            f"--parent-pid {args.parent_pid}: no such process; pass the PID of the process "
            "this worker should stop with (hpo tune passes its own), or leave the flag out"
        )
    # first: a launcher killed during our start-up is noticed too
    ChildContract.from_args(args).apply()
    from hpo.run.worker import WorkerStopped, run_worker
    from hpo.spec import load_spec

    spec = load_spec(args.spec, args.overrides, args.storage)
    from hpo.models.hardware import check_gpus

    check_gpus(spec.gpus_per_trial)
    if not args.await_go:  # `hpo tune` checked before starting its own workers
        from hpo.run.preflight import preflight

        # a worker joining from another machine, where a model path or the data may be missing:
        # one line now, not the hub's retries and a failed trial of the shared study per try
        preflight(spec, notes=False)
    name = args.name or f"{socket.gethostname()}/{os.getpid()}"
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s [{name}] %(message)s", stream=sys.stdout
    )
    for noisy in ("optuna", "transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.await_go and not await_go():
        return 0
    try:
        ran = run_worker(spec, worker=name, allow_spec_change=args.allow_spec_change)
    except WorkerStopped as exc:
        log.error("%s", exc)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    log.info("done after %d trials", ran)  # the line's prefix names the worker
    return 0
