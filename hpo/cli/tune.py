"""``hpo tune``: run a study with N worker processes and a progress bar, then show its best
trial."""

from __future__ import annotations

from hpo.cli._common import (
    _memory_mb,
    _positive_int,
    _seconds,
    _thread_count,
    add_spec_args,
    add_spec_change_arg,
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "tune", help="run a study with N worker processes and a progress bar"
    )
    add_spec_args(parser)
    parser.add_argument(
        "--workers", type=_positive_int, default=1, help="parallel worker processes (default 1)"
    )
    parser.add_argument(
        "--threads",
        type=_thread_count,
        help="torch CPU threads per worker (default: the cores split evenly between workers)",
    )
    parser.add_argument("--restart-dead", action="store_true", help="replace a worker that dies")
    parser.add_argument(
        "--timeout",
        type=_seconds,
        metavar="DURATION",
        help="wall-clock budget, e.g. 90m or 2h: no trial starts that the rest cannot fit (the "
        "study's median trial), running ones end at their next epoch's end and are kept",
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
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.cli.best import print_best
    from hpo.run.tune import tune
    from hpo.study import best_trial

    overrides = [*args.overrides, *([f"timeout={args.timeout}"] if args.timeout else [])]
    code, study = tune(
        args.spec,
        overrides,
        args.storage,
        args.workers,
        args.restart_dead,
        progress=not args.no_progress,
        allow_spec_change=args.allow_spec_change,
        threads=args.threads,
        memory_per_worker_mb=args.memory_per_worker,
    )
    if code == 0:
        print_best(best_trial(study), study.study_name)
    return code
