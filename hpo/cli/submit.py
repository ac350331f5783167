"""``hpo submit --slurm``: create the study, then run its workers as a Slurm job array."""

from __future__ import annotations

from hpo.cli._common import (
    _non_negative_int,
    _positive_int,
    _seconds,
    add_spec_args,
    add_spec_change_arg,
)

DEFAULT_CPUS_PER_WORKER = 4  # a tiny-to-base encoder's trial rarely speeds up past 4 CPU threads


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "submit", help="create the study, then run its workers as a Slurm job array"
    )
    add_spec_args(parser)
    parser.add_argument(
        "--slurm",
        action="store_true",
        required=True,
        help="submit with sbatch (the only scheduler so far)",
    )
    parser.add_argument(
        "--workers", type=_positive_int, required=True, help="array tasks, one worker each"
    )
    parser.add_argument(
        "--cpus-per-worker",
        type=_positive_int,
        default=DEFAULT_CPUS_PER_WORKER,
        help=f"cores per task; the worker's torch threads (default {DEFAULT_CPUS_PER_WORKER})",
    )
    parser.add_argument(
        "--gpus-per-worker",
        type=_non_negative_int,
        default=0,
        help="GPUs per task (--gres=gpu:G; default 0)",
    )
    parser.add_argument("--partition", help="Slurm partition (default: the cluster's)")
    parser.add_argument(
        "--time",
        help="time limit per task, e.g. 12:00:00; a minute before it the worker "
        "re-queues its running trial and exits",
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        metavar="DURATION",
        help="the study's wall-clock budget from now (queue time included), e.g. 90m or 2h; "
        "as in hpo tune, no task starts a trial the rest cannot fit (default: the spec's timeout)",
    )
    add_spec_change_arg(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.run.submit import submit_slurm

    submitted = submit_slurm(
        args.spec,
        args.overrides,
        args.storage,
        workers=args.workers,
        cpus_per_worker=args.cpus_per_worker,
        gpus_per_worker=args.gpus_per_worker,
        partition=args.partition,
        time_limit=args.time,
        timeout=args.timeout,
        allow_spec_change=args.allow_spec_change,
    )
    print(f"watch it: hpo status {args.spec}   |   squeue -j {submitted.job_id}")
    return 0
