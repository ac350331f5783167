"""``hpo status``: a study's trial counts, best value, pace and ETA, and where each running
trial is; without a study, one line per study in the storage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpo.cli._common import add_study_args

if TYPE_CHECKING:
    from hpo.study.records import TrialCounts


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
    from hpo.study import study_status
    from hpo.study.records import load_study_ref

    s = study_status(load_study_ref(args.study, args.storage))
    counts = s.counts
    stale = sum(trial["silent_seconds"] is not None for trial in s.running)
    print(f"study {s.study} ({s.task}, {s.direction} {s.metric})")
    print("  " + _states(counts, stale))
    print(f"  finished {counts.finished}/{s.n_trials or '?'}   best {_best(counts)}")
    pace = [f"{s.trials_per_hour:.1f} trials/hour"] if s.trials_per_hour else []
    if s.eta_hours is not None:  # from the running trials' own ETAs and the trials left
        pace.append(f"ETA {_duration(s.eta_hours)}")
    if pace:
        print("  " + "   ".join(pace))
    if s.fidelity:
        print(f"  fidelity: {s.fidelity}")
    if (left := s.budget_seconds_left) is not None:
        print(f"  time budget: {_duration(left / 3600) + ' left' if left > 0 else 'spent'}")
    for trial in s.running:
        if trial["silent_seconds"] is not None:
            print(f"  trial {trial['number']} {_stale_words(trial)}")
            continue
        where = (
            f"epoch {trial['epoch']}/{trial['epochs']} step {trial['step']}/{trial['steps']}, ETA "
            f"{_duration(trial['eta_seconds'] / 3600)}"
            if "epoch" in trial
            else "starting"
        )
        print(f"  trial {trial['number']} running on {trial['worker'] or '?'}: {where}")
    for check in s.estimate:
        print("  " + _estimate_words(check))
    return 0


def _estimate_words(check: dict) -> str:
    """``encoder=tiny formulation=pairs: hpo validate --estimate said 6.0 s an epoch at 1 thread;
    its 3 complete trials took 3.0 s an epoch (median), 0.5x the estimate``: which figure is
    which, and the ratio of the trials to the estimate ("said 6.0 s: 2.0x that" read either way)."""
    from hpo.run.trial_line import compact_params

    params, trials, threads = check["params"], check["trials"], check["threads"]
    said = (
        f"hpo validate --estimate said {_seconds(check['estimated_epoch_s'])} an epoch at "
        f"{threads} thread{'s' * (threads != 1)}"
    )
    took = (
        f"its {trials} complete trial{'s' * (trials > 1)} took "
        f"{_seconds(check['measured_epoch_s'])} an epoch (median), "
        f"{check['measured_epoch_s'] / check['estimated_epoch_s']:.1f}x the estimate"
    )
    return f"{compact_params(params, list(params), limit=None)}: {said}; {took}"


def _list_studies(storage) -> int:
    from hpo.storage_url import StorageUrl
    from hpo.study import study_summaries

    url = StorageUrl.resolve(storage)
    studies = study_summaries(url)
    if not studies:
        print(f"no studies in {url}")
        return 0
    width = max(len(s.study) for s in studies)
    for s in studies:
        print(f"{s.study:<{width}}  {_states(s.counts)}  best {_best(s.counts)}")
    return 0


def _states(counts: TrialCounts, stale: int = 0) -> str:
    """Trials by state; interrupted trials queued again are re-queued, not failed, and RUNNING
    ones no worker beats any more are stale, not running (each shown only when there are some,
    as the progress bar shows them)."""
    states = [f"complete={counts.complete}", f"pruned={counts.pruned}", f"failed={counts.failed}"]
    if counts.requeued:
        states.append(f"re-queued={counts.requeued}")
    states.append(f"running={counts.running - stale}")
    if stale:
        states.append(f"stale={stale}")
    return "  ".join([*states, f"waiting={counts.waiting}"])


def _stale_words(trial: dict) -> str:
    """A RUNNING trial whose heartbeat stopped: not running, whatever its progress last said."""
    return (
        f"stale: no heartbeat from {trial['worker'] or '?'} for "
        f"{_duration(trial['silent_seconds'] / 3600)} (it died, hung or lost the database); the "
        "next worker on the study fails it and re-queues it"
    )


def _best(counts: TrialCounts) -> str:
    return "-" if counts.best is None else f"{counts.best:.4f}"  # as hpo best rounds it


def _duration(hours: float) -> str:
    """In the unit that shows it: "ETA 0.0 h" with 23 trials left told the user nothing."""
    if hours >= 1:
        return f"{hours:.1f} h"
    if hours * 60 >= 1:
        return f"{hours * 60:.0f} min"
    return f"{max(hours * 3600, 1):.0f} s"


def _seconds(seconds: float) -> str:
    return _duration(seconds / 3600) if seconds >= 60 else f"{seconds:.1f} s"
