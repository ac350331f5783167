"""What several subcommands share: the flags they declare alike, the argparse value types,
and the parser class that makes every usage error one line."""

from __future__ import annotations

import argparse
import os


class OneLineErrors(argparse.ArgumentParser):
    """Usage errors as one line naming the problem and where to look, exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):
        return super().parse_known_args(self._dashed_values_joined(args), namespace)

    def _dashed_values_joined(self, args) -> list[str] | None:
        """``--timeout -5m`` as ``--timeout=-5m``: argparse takes a value that starts with a dash
        and is not a plain number for a flag, and says only "expected one argument"; joined, the
        value's own check names what is wrong with it. A known flag is never taken as a value."""
        if args is None:
            return None
        args, joined = list(args), []
        while args:
            token = args.pop(0)
            action = self._option_string_actions.get(token)
            takes_one = action is not None and action.nargs is None and action.option_strings
            if takes_one and args and args[0].startswith("-") and args[0] != "--":
                if args[0].split("=", 1)[0] not in self._option_string_actions:
                    token = f"{token}={args.pop(0)}"
            joined.append(token)
        return joined


def add_spec_args(parser: argparse.ArgumentParser, by_name: bool = False) -> None:
    """SPEC, ``--set KEY=VALUE`` (``args.overrides``) and ``--storage``. ``by_name``: SPEC may
    also be a study's name, whose recorded spec is used (``hpo.study.records.load_spec_ref``)."""
    parser.add_argument(
        "spec",
        metavar="STUDY" if by_name else "SPEC",
        help="study name (the spec it was tuned with, --set flags and all), or its YAML file"
        if by_name
        else "study YAML file, e.g. studies/criteria-smoke.yaml",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a spec setting, e.g. --set n_trials=20 --set train.epochs=2 (repeatable)",
    )
    add_storage_arg(parser)


def add_study_args(parser: argparse.ArgumentParser, optional: bool = False) -> None:
    """STUDY (a name or a spec file) and ``--storage``: the commands that read a study.
    ``optional``: STUDY may be left out (``args.study`` None), as ``hpo status`` lists them."""
    parser.add_argument(
        "study",
        nargs="?" if optional else None,
        help="study name, or its YAML file"
        + ("; leave it out to list the studies in the storage" if optional else ""),
    )
    add_storage_arg(parser)


def add_storage_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage",
        help="storage URL (beats $HPO_STORAGE and the spec); default sqlite:///_runs/hpo.db",
    )


def add_threads_arg(parser: argparse.ArgumentParser, per: str, default: str) -> None:
    """``--threads``: the torch CPU threads of each process the command trains or predicts in
    (``per``: which), ``default`` in words; None when not given (``threads_per_process``)."""
    parser.add_argument(
        "--threads",
        type=_thread_count,
        help=f"torch CPU threads {per} (default: {default}); on a machine busy with other work "
        "fewer run faster",
    )


def add_progress_arg(parser: argparse.ArgumentParser, without: str = "logs only") -> None:
    """``--progress`` / ``--no-progress`` (``args.progress``: True, False, or None when neither
    was given: ``shows_progress`` then draws the bar only on a terminal)."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        help="a progress bar on standard error (default: only where that is a terminal, so a "
        f"log file or pipe gets none); --no-progress: no bar ({without})",
    )


def add_spec_change_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-spec-change",
        action="store_true",
        help="join a study created from a different spec (search space, task, metric or data) "
        "and record this spec as its own; without it such a run is refused (n_trials and "
        "timeout are no change: raising n_trials resumes the search)",
    )


# The argparse value types keep their leading underscore: argparse names a type in its usage
# error ("argument --workers: invalid _positive_int value: 'x'"), so the names are user-visible.
def _whole_number(text: str, what: str) -> int:
    """``text`` as an int; else argparse's message names the checker function (``invalid
    _port value: 'abc'``), not what the flag takes."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None


def _port(text: str) -> int:
    value = _whole_number(text, "a port number 1-65535")
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 1-65535, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = _whole_number(text, "0 or more")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = _whole_number(text, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _thread_count(text: str) -> int:
    """Torch threads for a worker on this machine: more than its CPUs only slows it down, and
    100000 exhausts its memory (a MemoryError in every worker)."""
    value, cpus = _positive_int(text), os.cpu_count() or 1
    if value > cpus:
        raise argparse.ArgumentTypeError(
            f"must be at most {cpus} (this machine's CPUs), got {value}"
        )
    return value


def _quantity(
    units: dict[str, float], default: str, example: str, least: float, most: tuple[float, str]
):
    """An argparse type for a number with an optional unit suffix ('6G', '90m'), in the default
    unit, from ``least`` to ``most`` (the limit, and how a message writes it)."""
    most, most_shown = most

    def parse(text: str) -> float:
        number, unit = (
            (text[:-1], text[-1].upper()) if text[-1:].upper() in units else (text, default)
        )
        try:
            value = float(number) * units[unit]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be a number with an optional unit, like {example}; got {text!r}"
            ) from None
        if not value >= least:
            raise argparse.ArgumentTypeError(
                f"must be at least {least:g}{default.lower()}, got {text!r}"
            )
        # inf, 1e400 (inf too) and the like: an OverflowError traceback in int() or a date
        if not value <= most:
            raise argparse.ArgumentTypeError(
                f"must be a finite number up to {most_shown}, like {example}; got {text!r}"
            )
        return value

    return parse


# a duration in seconds, up to a year: a longer budget is none (leave --timeout out)
_seconds = _quantity({"S": 1, "M": 60, "H": 3600}, "S", "90m or 2h", 1, (365 * 24 * 3600, "8760h"))


def _memory_mb(text: str) -> int:
    """A memory size in MiB from '6000', '6000M' or '6G'."""
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}
    # up to an exbibyte: past the machine is refused with its size, where the machine is known
    return int(_quantity(units, "M", "6G or 6000M", 1, (1024**4, "1048576T"))(text))
