"""``hpo validate``: check a study file, its data and encoders, as ``hpo tune`` would before
it starts; creates nothing."""

from __future__ import annotations

from hpo.cli._common import add_spec_args


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "validate", help="check a study file, its data and encoders; creates nothing"
    )
    add_spec_args(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.run.preflight import preflight
    from hpo.spec import load_spec

    spec = load_spec(args.spec, args.overrides, args.storage)
    for note in preflight(spec) + _search_notes(spec):
        print(f"  {note}")
    print(
        f"{args.spec}: valid — study {spec.name!r}, {spec.n_trials} trials, "
        f"{len(spec.search_space)} searched parameters, storage {spec.storage}"
    )  # str(): redacted
    return 0


def _search_notes(spec) -> list[str]:
    """The conditional parameters, grouped by condition, and the warm start."""
    by_condition: dict[str, list[str]] = {}
    for name, param in spec.search_space.items():
        if param.when:
            by_condition.setdefault(param.condition_text(), []).append(name)
    notes = [
        f"{', '.join(names)}: sampled only when {condition}"
        for condition, names in by_condition.items()
    ]
    if spec.warm_start:
        notes.append(
            f"warm start: {len(spec.warm_start)} parameter sets, queued once when the study is "
            "created"
        )
    return notes
