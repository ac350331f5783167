"""``hpo status``: a study's trial counts, best value, pace and ETA, and where each running
trial is; without a study, one line per study in the storage."""

from __future__ import annotations

from hpo.cli._common import add_study_args


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "status",
        help="trial counts, best value, trials/hour and ETA; with no study, every study's counts",
    )
    add_study_args(parser, optional=True)
    parser.set_defaults(func=run)


def run(args) -> int:
    if args.study is None:
        return _list_studies(args.storage)
    from hpo.study import load_study_ref, study_status

    s = study_status(load_study_ref(args.study, args.storage))
    counts = s["counts"]
    print(f"study {s['study']} ({s['task']}, {s['direction']} {s['metric']})")
    print(
        "  "
        + "  ".join(
            f"{k}={counts[k]}" for k in ("complete", "pruned", "failed", "running", "waiting")
        )
    )
    print(f"  finished {counts['finished']}/{s['n_trials'] or '?'}   best {_best(counts)}")
    if s["trials_per_hour"]:
        eta = f"   ETA {_duration(s['eta_hours'])}" if s["eta_hours"] else ""
        print(f"  {s['trials_per_hour']:.1f} trials/hour{eta}")
    if (left := s["budget_seconds_left"]) is not None:
        print(f"  time budget: {_duration(left / 3600) + ' left' if left > 0 else 'spent'}")
    for trial in s["running"]:
        where = (
            f"epoch {trial['epoch']}/{trial['epochs']} step {trial['step']}/{trial['steps']}, ETA "
            f"{_duration(trial['eta_seconds'] / 3600)}"
            if "epoch" in trial
            else "starting"
        )
        print(f"  trial {trial['number']} running on {trial['worker'] or '?'}: {where}")
    return 0


def _list_studies(storage) -> int:
    from hpo.storage_url import StorageUrl
    from hpo.study import study_summaries

    url = StorageUrl.resolve(storage)
    studies = study_summaries(url)
    if not studies:
        print(f"no studies in {url}")
        return 0
    width = max(len(s["study"]) for s in studies)
    for s in studies:
        counts = s["counts"]
        states = "  ".join(
            f"{k}={counts[k]}" for k in ("complete", "pruned", "failed", "running", "waiting")
        )
        print(f"{s['study']:<{width}}  {states}  best {_best(counts)}")
    return 0


def _best(counts: dict) -> str:
    return "-" if counts["best"] is None else f"{counts['best']:.4f}"  # as hpo best rounds it


def _duration(hours: float) -> str:
    """In the unit that shows it: "ETA 0.0 h" with 23 trials left told the user nothing."""
    if hours >= 1:
        return f"{hours:.1f} h"
    if hours * 60 >= 1:
        return f"{hours * 60:.0f} min"
    return f"{max(hours * 3600, 1):.0f} s"
