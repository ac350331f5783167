"""``hpo export``: every trial of a study as CSV (flat columns) or JSON (nested), to standard
output or a file that appears whole or not at all."""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import datetime
from pathlib import Path

from hpo.attributes import METRIC_PREFIX, OLD_METRICS_ATTR
from hpo.cli._common import add_study_args


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("export", help="every trial as CSV or JSON")
    add_study_args(parser)
    parser.add_argument("--format", choices=["csv", "json"], default="csv")
    parser.add_argument("--out", help="file to write (default: standard output)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out file that is not an earlier export (never the study "
        "file or a database)",
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.study.records import load_study_ref

    rows = [
        _trial_row(t) for t in load_study_ref(args.study, args.storage).get_trials(deepcopy=False)
    ]
    text = _as_json(rows) if args.format == "json" else _as_csv(rows)
    if not args.out:
        sys.stdout.write(text)
        return 0
    _write(args.out, text, args.study, args.force)
    print(f"wrote {len(rows)} trials to {args.out}", file=sys.stderr)
    return 0


def _as_json(rows: list[dict]) -> str:
    return json.dumps(rows, indent=2, default=str) + "\n"


def _as_csv(rows: list[dict]) -> str:
    text = io.StringIO(newline="")
    columns = list(dict.fromkeys(key for row in rows for key in _flat(row)))
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(_flat(row) for row in rows)
    return text.getvalue()


def _write(out: str, text: str, study_ref: str, force: bool) -> None:
    """``text`` at ``out``, whole or not at all; never over the study file it was read from,
    nor over a database (the study's storage); over another file than an earlier export (the
    study's posts, say) only with ``force``."""
    from hpo.errors import UsageError
    from hpo.outputs import atomic_text

    protected = {study_ref: "the study file this export reads"} if Path(study_ref).is_file() else {}
    rules = {"may_replace": _is_export, "kind": "trials export", "force": force}
    try:
        with atomic_text(out, protected=protected, **rules) as stream:
            stream.write(text)
    except OSError as exc:
        raise UsageError(
            f"cannot write {out}: {exc.strerror}; pass --out to a writable file"
        ) from None


def _is_export(path: Path) -> bool:
    """``path`` starts as an export does (a CSV header or a JSON list led by the trial number):
    a rerun may replace it."""
    try:
        with path.open(encoding="utf-8") as stream:
            start = stream.read(64)
    except (OSError, UnicodeDecodeError):
        return False
    return start.startswith("number,") or "".join(start.split()).startswith('[{"number":')


def _trial_row(trial) -> dict:
    """A trial as one row: its validation metrics grouped (``metrics.NAME`` columns), apart
    from the other user attributes, whichever way the trial recorded them."""
    from hpo.study.records import trial_metrics

    def iso(moment: datetime | None) -> str | None:
        return moment.isoformat() if moment else None

    return {
        "number": trial.number,
        "state": trial.state.name,
        "value": trial.value,
        "datetime_start": iso(trial.datetime_start),
        "datetime_complete": iso(trial.datetime_complete),
        "params": dict(trial.params),
        "metrics": trial_metrics(trial),
        "user_attrs": {
            key: value
            for key, value in trial.user_attrs.items()
            if not key.startswith(METRIC_PREFIX) and key != OLD_METRICS_ATTR
        },
    }


def _flat(row: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in row.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
