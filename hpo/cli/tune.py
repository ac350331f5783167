"""``hpo tune``: run a study with N worker processes and a progress bar, then sum it up: trials
by state, failures by reason, wall time, the best trial and the commands to run next."""

from __future__ import annotations

from hpo.cli._common import (
    _memory_mb,
    _positive_int,
    _seconds,
    add_progress_arg,
    add_spec_args,
    add_spec_change_arg,
    add_threads_arg,
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "tune", help="run a study with N worker processes and a progress bar"
    )
    add_spec_args(parser)
    parser.add_argument(
        "--workers", type=_positive_int, default=1, help="parallel worker processes (default 1)"
    )
    add_threads_arg(parser, "per worker", "the cores split evenly between workers")
    parser.add_argument("--restart-dead", action="store_true", help="replace a worker that dies")
    parser.add_argument(
        "--timeout",
        type=_seconds,
        metavar="DURATION",
        help="wall-clock budget, e.g. 90m or 2h: no trial starts that the rest cannot take to "
        "its pruner's first rung (without rungs: the study's median trial), running ones end at "
        "their next epoch's end and are kept",
    )
    parser.add_argument(
        "--memory-per-worker",
        type=_memory_mb,
        metavar="SIZE",
        help="host-memory ceiling per worker, e.g. 6G or 6000M: a step that would cross it backs "
        "off like a GPU out-of-memory (default: 90%% of this machine's memory split between "
        "workers)",
    )
    add_spec_change_arg(parser)
    add_progress_arg(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    import time

    from hpo.process import shows_progress
    from hpo.run.summary import tune_summary
    from hpo.run.tune import TuneOptions, tune

    started = time.monotonic()
    options = TuneOptions(
        workers=args.workers,
        threads=args.threads,
        memory_per_worker_mb=args.memory_per_worker,
        restart_dead=args.restart_dead,
        allow_spec_change=args.allow_spec_change,
        progress=shows_progress(args.progress),
        timeout=args.timeout,
    )
    code, study = tune(args.spec, args.overrides, args.storage, options)
    summary = tune_summary(
        study,
        time.monotonic() - started,
        spec_path=args.spec,
        overrides=args.overrides,  # what finalize and a resumed run repeat
        storage=args.storage,
        workers=args.workers,
        interrupted=code == 130,
        timeout=args.timeout,
        ended_cleanly=code == 0,
    )
    print("\n" + "\n".join(summary))
    return code
