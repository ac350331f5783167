"""``hpo status``: a study's trial counts, best value, pace and ETA, and where each running
trial is."""

from __future__ import annotations

import time

from hpo.cli._common import add_study_args


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("status", help="trial counts, best value, trials/hour and ETA")
    add_study_args(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.study import load_study_ref

    s = study_status(load_study_ref(args.study, args.storage))
    counts = s["counts"]
    print(f"study {s['study']} ({s['task']}, {s['direction']} {s['metric']})")
    print("  " + "  ".join(f"{k}={counts[k]}" for k in ("complete", "pruned", "failed", "running", "waiting")))
    best = "-" if counts["best"] is None else counts["best"]
    print(f"  finished {counts['finished']}/{s['n_trials'] or '?'}   best {best}")
    if s["trials_per_hour"]:
        eta = f"   ETA {_duration(s['eta_hours'])}" if s["eta_hours"] else ""
        print(f"  {s['trials_per_hour']:.1f} trials/hour{eta}")
    if (left := s["budget_seconds_left"]) is not None:
        print(f"  time budget: {_duration(left / 3600) + ' left' if left > 0 else 'spent'}")
    for trial in s["running"]:
        where = (f"epoch {trial['epoch']}/{trial['epochs']} step {trial['step']}/{trial['steps']}, ETA "
                 f"{_duration(trial['eta_seconds'] / 3600)}" if "epoch" in trial else "starting")
        print(f"  trial {trial['number']} running on {trial['worker'] or '?'}: {where}")
    return 0


def study_status(study) -> dict:
    """Counts by state, the best value, the pace and what remains, and where each running trial is."""
    from hpo.study import running_trials, state_counts, study_deadline, trials_per_hour

    counts = state_counts(study)
    n_trials = study.user_attrs.get("n_trials")
    rate = trials_per_hour(study)
    remaining = max(n_trials - counts["finished"], 0) if n_trials else None
    running = [{"number": t.number, "worker": t.user_attrs.get("worker"), **t.user_attrs.get("progress", {})}
               for t in running_trials(study)]
    return {"study": study.study_name, "task": study.user_attrs.get("task", "?"),
            "direction": study.direction.name.lower(), "metric": study.user_attrs.get("metric", "value"),
            "n_trials": n_trials, "counts": counts, "trials_per_hour": rate,
            "eta_hours": remaining / rate if rate and remaining else None, "running": running,
            "budget_seconds_left": None if (deadline := study_deadline(study)) is None else deadline - time.time()}


def _duration(hours: float) -> str:
    """In the unit that shows it: "ETA 0.0 h" with 23 trials left told the user nothing."""
    if hours >= 1:
        return f"{hours:.1f} h"
    if hours * 60 >= 1:
        return f"{hours * 60:.0f} min"
    return f"{max(hours * 3600, 1):.0f} s"
