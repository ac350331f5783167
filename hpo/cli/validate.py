"""``hpo validate``: check a study file, its data and encoders, as ``hpo tune`` would before
it starts; creates nothing."""

from __future__ import annotations

from hpo.cli._common import (
    _positive_int,
    _seconds,
    add_spec_args,
    add_spec_change_arg,
    add_threads_arg,
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "validate", help="check a study file, its data and encoders; creates nothing"
    )
    add_spec_args(parser)
    add_spec_change_arg(parser)
    parser.add_argument(
        "--estimate",
        action="store_true",
        help="also time a few training steps of each encoder, criteria formulation and long-text "
        "handling the space can choose (seconds to minutes) and estimate the study's compute: "
        "per epoch, per trial, the whole study, what its timeout buys; kept under "
        "output_dir/estimates/ for the study's plan and hpo status",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="trials at a time, for the estimate: each encoder is timed at the threads each "
        "worker of hpo tune --workers N gets (default 1)",
    )
    add_threads_arg(
        parser,
        "per worker, for the estimate, as hpo tune --threads",
        "the cores split evenly between workers",
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        metavar="DURATION",
        help="the wall-clock budget you will give hpo tune --timeout, e.g. 90m or 2h: the "
        "estimate says how many trials it buys and the strategy it sets (default: the spec's)",
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.run.preflight import preflight
    from hpo.spec import load_spec
    from hpo.study import existing_spec_change

    spec = load_spec(args.spec, args.overrides, args.storage, timeout=args.timeout)
    notes = preflight(spec)
    # an existing study of its name that hpo tune would refuse: refused here too, before a note
    if changed := existing_spec_change(spec, args.allow_spec_change):
        notes.append(
            f"study {spec.name!r} exists with another spec ({changed}); "
            "--allow-spec-change records this one as its own"
        )
    for note in notes + _search_notes(spec) + _rung_notes(spec):
        print(f"  {note}")
    if args.estimate:
        from hpo.run.estimate import estimate_notes
        from hpo.study.search import sample_points

        for note in estimate_notes(spec, sample_points(spec), args.workers, args.threads):
            print(f"  {note}", flush=True)
    elif spec.sampler.name == "auto":  # --estimate states it from its own timing
        from hpo.study.search import recorded_plan

        for note in recorded_plan(spec).describe():
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
    if fidelity := spec.fidelity:
        notes.append(
            f"fidelity: the first {fidelity.check} full trials also run on "
            f"{fidelity.train_share:.0%} of the training posts; at a rank correlation of "
            f"{fidelity.min_rank_correlation:g} or more, later configurations are screened there "
            f"and the top {fidelity.promote:.0%} re-run in full, else every trial stays full"
        )
    if _ranks_differently(spec):
        notes.append(
            f"warning: prune_on: {spec.prune_on} ranks how well scores separate, but {spec.metric} "
            "is judged at a fixed 0.5 threshold, so a configuration can rank first and score 0 "
            "there and the pruner keeps the wrong ones; leave prune_on out (the pruner judges "
            "the metric itself) or set train.threshold: tuned"
        )
    return notes


def _rung_notes(spec) -> list[str]:
    """Where the pruner judges trials: its rungs as shares of an epoch and training posts."""
    from fractions import Fraction

    from hpo.data import load_redsm5, split_posts, symptom_profiles
    from hpo.study.search import rung_schedule

    rungs, units = rung_schedule(spec), spec.pruner.units_per_epoch
    if not rungs:
        return []
    fractions, seed = spec.setting("split_fractions"), spec.setting("split_seed")
    posts = len(split_posts(symptom_profiles(load_redsm5(spec.data_dir)), fractions, seed).train)
    looks = ", ".join(
        f"{Fraction(rung, units)} epoch{'s' * (rung > units)} ({rung * posts // units:,} posts)"
        for rung in rungs
    )
    return [
        f"pruning: {spec.pruner.name} judges trials at step {', '.join(map(str, rungs))} "
        f"({units} per epoch of {posts:,} training posts), after {looks} seen; survivors "
        "train to their last epoch, whose report is never judged"
    ]


def _ranks_differently(spec) -> bool:
    """A threshold-free pruning signal for a metric judged at a fixed threshold (measured in
    bench pruning_regret: it kept the configurations that end worst)."""
    from hpo.train.evaluate import THRESHOLDED

    return (
        spec.prune_on is not None
        and spec.prune_on not in THRESHOLDED
        and spec.metric in THRESHOLDED
        and spec.setting("threshold") == "fixed"
        and "threshold" not in spec.search_space
    )
