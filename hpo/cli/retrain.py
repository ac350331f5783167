"""``hpo retrain``: one of finalize's retraining processes (``hpo/final/retrain.py``).
Not listed in ``hpo --help``: finalize starts them."""

from __future__ import annotations

from hpo.cli._common import _memory_mb, _positive_int, add_spec_args


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("retrain")
    add_spec_args(parser)
    parser.add_argument(
        "--runs-dir", required=True, help="finalize's runs/ folder, holding plan.json"
    )
    parser.add_argument("--threads", type=_positive_int, required=True, help="torch CPU threads")
    parser.add_argument(
        "--parent-pid",
        type=_positive_int,
        required=True,
        metavar="PID",
        help="the finalize process: this one gets SIGTERM when it exits",
    )
    parser.add_argument(
        "--memory-limit",
        type=_memory_mb,
        metavar="SIZE",
        help="host-memory ceiling of this process",
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.final.retrain import retrain_child
    from hpo.train.child import ChildContract

    return retrain_child(args.spec, args.overrides, args.runs_dir, ChildContract.from_args(args))
