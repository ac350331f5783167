"""``hpo status``: a study's trial counts, best value, pace and ETA, and where each running
trial is."""

from __future__ import annotations

from hpo.cli._common import add_study_args


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("status", help="trial counts, best value, trials/hour and ETA")
    add_study_args(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
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
    best = "-" if counts["best"] is None else f"{counts['best']:.4f}"  # as hpo best rounds it
    print(f"  finished {counts['finished']}/{s['n_trials'] or '?'}   best {best}")
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


def _duration(hours: float) -> str:
    """In the unit that shows it: "ETA 0.0 h" with 23 trials left told the user nothing."""
    if hours >= 1:
        return f"{hours:.1f} h"
    if hours * 60 >= 1:
        return f"{hours * 60:.0f} min"
    return f"{max(hours * 3600, 1):.0f} s"
