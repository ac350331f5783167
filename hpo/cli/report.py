"""``hpo report``: PNG plots and a Markdown summary of a study (``hpo/report.py``), one written
path a line."""

from __future__ import annotations

from hpo.cli._common import add_study_args


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("report", help="PNG plots and a Markdown summary of a study")
    add_study_args(parser)
    parser.add_argument(
        "--out",
        help="folder to write (default _runs/reports/<study>); any folder but a saved model's",
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.report import write_report

    for path in write_report(args.study, args.storage, args.out):
        print(path)
    return 0
