"""The ``hpo`` command. One module per subcommand, each with ``add_parser(subparsers)``, which
declares its flags, and ``run(args)``, which reads them once and returns the exit code; flags
that several subcommands share are declared in ``_common``. Every module imports only
argparse at start-up: ``hpo worker`` and ``hpo retrain`` processes parse their arguments
before loading anything heavy."""

from __future__ import annotations

import argparse
import sys

from hpo.cli import (
    best,
    dashboard,
    data,
    enqueue,
    export,
    finalize,
    make_tiny_encoder,
    predict,
    report,
    retrain,
    status,
    storage_proxy,
    submit,
    tune,
    validate,
    worker,
)
from hpo.cli._common import OneLineErrors
from hpo.errors import UsageError

DESCRIPTION = (
    "Tune transformer encoders as ReDSM5 symptom classifiers: hpo validate a study file, "
    "hpo tune it with N workers, watch it with hpo status or hpo dashboard, then hpo finalize "
    "the best configuration into one model and hpo predict with it. "
    "Each command's --help says more; the README has a five-minute guide."
)
# In the order ``hpo --help`` lists them (retrain is not listed: finalize starts it).
SUBCOMMANDS = (
    tune,
    submit,
    finalize,
    retrain,
    worker,
    validate,
    enqueue,
    status,
    best,
    export,
    predict,
    report,
    dashboard,
    storage_proxy,
    make_tiny_encoder,
    data,
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(prog="hpo", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"hpo {_version()}")
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=OneLineErrors
    )
    for subcommand in SUBCOMMANDS:
        subcommand.add_parser(subparsers)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hpo")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _quiet_libraries() -> None:
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"hpo: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except (
        OSError
    ) as exc:  # a path the command cannot write (or read): the user's to fix, in one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(
            f"hpo: error: {where}{exc.strerror or exc}; check the path and its permissions",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130
