"""The ``hpo`` command. One module per subcommand, each with ``add_parser(subparsers)``, which
declares its flags, and ``run(args)``, which reads them once and returns the exit code; flags
that several subcommands share are declared in ``_common``. Every module imports only
argparse at start-up: ``hpo worker`` and ``hpo retrain`` processes parse their arguments
before loading anything heavy."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

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


# hpo's one log format: hpo worker writes its lines so, with its own name for "hpo"
LOG_FORMAT = "%(asctime)s [hpo] %(message)s"
OWN_LOG_FORMAT = {"worker", "storage-proxy"}  # they log "[worker name]" / "[storage-proxy]"
# (message, category) of library warnings known to be harmless, silenced rather than shown
HARMLESS_WARNINGS = (
    # peft asks every LoRA model for transformers 5's deprecated alias; nothing for us to change
    ("`is_gradient_checkpointing` is deprecated", FutureWarning),
)


def _quiet_libraries() -> None:
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # transformers reads both when it loads: a command that never needs it (a refused spec,
    # hpo status) does not spend ~0.6 s importing it here
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()  # transformers' own bars start off when the hub's are
    if "transformers" in sys.modules:  # loaded already (an in-process caller): tell it now
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    for message, category in HARMLESS_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


class _Stderr(logging.StreamHandler):
    """Writes to the sys.stderr of the moment, not the one at set-up (tests swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


@contextmanager
def _one_log_format(command: str) -> Iterator[None]:
    """For the command's run, Optuna's records and Python warnings (transformers', torch's)
    go to the root logger, and from there to stderr in hpo's format, instead of three formats
    of their own. The commands in OWN_LOG_FORMAT set up the root logger themselves (the same
    format, with their name), and their basicConfig does nothing once a handler is there."""
    from hpo.study import log_through_hpo

    log_through_hpo()
    handler, root = _Stderr(), logging.getLogger()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    if command not in OWN_LOG_FORMAT:
        root.addHandler(handler)
    logging.captureWarnings(True)
    try:
        yield
    finally:  # an in-process caller (a test, the Python API) gets its logging back as it was
        logging.captureWarnings(False)
        root.removeHandler(handler)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    with _one_log_format(args.command):
        return _run(args)


def _run(args) -> int:
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe is found here, not at exit where it would traceback
        return code
    except BrokenPipeError:  # `hpo status | head`: the reader has what it wanted
        _stdout_to_devnull()
        return 128 + signal.SIGPIPE  # what a shell reports for a writer a closed pipe stopped
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


def _stdout_to_devnull() -> None:
    """The interpreter flushes stdout again at exit; into a closed pipe that is a second
    error, so point the descriptor at /dev/null (the recipe of Python's signal docs)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # swapped for an in-process caller
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
