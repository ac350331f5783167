"""``hpo enqueue``: queue one parameter set by hand on a spec's study (created if need be);
parameters left out are sampled. The study keeps its own recorded spec."""

from __future__ import annotations

from collections.abc import Sequence

from hpo.cli._common import add_storage_arg


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "enqueue", help="queue one parameter set by hand on a spec's study"
    )
    parser.add_argument("spec", help="study YAML file, e.g. studies/criteria-supermax.yaml")
    parser.add_argument(
        "--set",
        dest="params",
        action="append",
        required=True,
        metavar="KEY=VALUE",
        help="a searched parameter's value, e.g. --set learning_rate=2e-5 (repeatable; "
        "parameters left out are sampled), or a spec setting as hpo tune takes it, e.g. "
        "--set name=my-study to reach the study tune made with that override",
    )
    add_storage_arg(parser)
    parser.add_argument(
        "--allow-spec-change",
        action="store_true",
        help="queue onto a study created from a different spec; the study keeps its own spec",
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.spec import SpecError, load_spec

    point, overrides = _point(args.params)
    spec = load_spec(args.spec, overrides, args.storage)
    if not point:
        raise SpecError(
            "--set: give at least one searched parameter, e.g. --set learning_rate=2e-5"
        )
    if problem := spec.point_problem(
        point
    ):  # before the study is opened: bad input creates nothing
        raise SpecError(
            f"--set {problem[0]}: {problem[1]}" if problem[0] else f"--set: {problem[1]}"
        )
    from hpo.study import open_study
    from hpo.study.records import enqueue, trial_census

    # queues; never changes the spec
    study = open_study(spec, allow_spec_change=args.allow_spec_change, adopt_spec=False)
    shown = ", ".join(f"{k}={v}" for k, v in spec.typed_point(point).items())
    if enqueue(study, spec, point):
        finished = trial_census(study)["finished"]
        runs = (
            "the next free worker runs it"
            if finished < spec.n_trials
            else f"the study holds its {spec.n_trials} trials (n_trials), so no worker will "
            f"take it: run hpo tune with --set n_trials={finished + 1} or more"
        )
        print(f"queued {shown} on study {spec.name!r}; {runs}")
    else:
        print(f"study {spec.name!r} already has a trial with {shown}; nothing queued")
    return 0


def _point(assignments: Sequence[str]) -> tuple[dict[str, object], list[str]]:
    """``key=value`` per searched parameter, each given once; and the spec overrides (a key
    that starts with a spec's top-level key, as ``hpo tune --set`` takes them). No searched
    parameter shares a name with a top-level key, so each text is one or the other."""
    from hpo.spec import SpecError, StudySpec, parse_override

    point: dict[str, object] = {}
    overrides: list[str] = []
    for text in assignments:
        try:
            keys, value = parse_override(text)
        except SpecError:
            raise SpecError(
                f"--set {text!r}: expected the form key=value, e.g. --set learning_rate=2e-5"
            ) from None
        if keys[0] in StudySpec.model_fields:
            overrides.append(text)
            continue
        if len(keys) != 1:
            raise SpecError(
                f"--set {text}: name a searched parameter (e.g. --set learning_rate=2e-5) or a "
                "spec setting (e.g. --set name=my-study)"
            )
        if keys[0] in point:  # which one was meant? Not the last by accident
            raise SpecError(
                f"--set {keys[0]}: given twice ({point[keys[0]]}, then {value}); give it once"
            )
        point[keys[0]] = value
    return point, overrides
