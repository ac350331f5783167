"""What ``hpo tune`` says when it ends: how the trials ended (failures grouped by reason), how
long it ran, the best value, and the commands to run next."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import datetime, timedelta

from hpo.run.trial_line import compact_params, duration, searched_names
from hpo.spec import load_spec
from hpo.storage_url import StorageUrl
from hpo.study import best_trial, interval_words
from hpo.study.records import trial_outcomes
from hpo.study.storage import DatabaseProblem, caused_by_database, database_problem

# the order a person reads a study's trials in; zero counts are left out
STATES = (
    ("complete", "complete"),
    ("pruned", "pruned"),
    ("failed", "failed"),
    ("requeued", "re-queued"),
    ("running", "running"),
    ("waiting", "waiting"),
)


def tune_summary(
    study,
    seconds: float,
    *,
    spec_path: str,
    overrides: Sequence[str] = (),
    storage: str | None = None,
    workers: int = 1,
    interrupted: bool = False,
    timeout: float | None = None,
    ended_cleanly: bool = False,
) -> list[str]:
    """The summary's lines. ``storage``: the ``--storage`` flag as given; ``interrupted``: Ctrl-C
    (or SIGTERM) stopped the run; ``timeout``: the ``--timeout`` given, in seconds;
    ``ended_cleanly``: the run exited 0. Where the run was interrupted, left queued trials (a
    time budget ends before the portfolio's last point starts) or ended by its time budget
    short of ``n_trials``, the first command resumes it, and queued trials run first. A run
    that started no trial of a study already holding ``n_trials`` says the study was done."""
    spec = load_spec(spec_path, overrides, storage)
    try:
        outcomes, best = trial_outcomes(study), best_trial(study)
    except Exception as exc:
        if not caused_by_database(exc):
            raise
        problem = database_problem(study, exc)
        return [_unreadable(study, seconds, interrupted, problem, spec.storage)]
    counts = outcomes.counts
    finished = counts.finished
    tally = f"{finished} of {spec.n_trials} trials finished"
    if interrupted:
        lines = [f"study {study.study_name!r} stopped after {duration(seconds)}: {tally}"]
    elif finished >= spec.n_trials and not _started_since(study, seconds):
        # "ran for 5.5s: 6 of 6 trials finished" read as if this run had run them
        lines = [f"study {study.study_name!r} was already done: {tally}; this run started none"]
    else:
        lines = [f"study {study.study_name!r} ran for {duration(seconds)}: {tally}"]
    tallies = [(getattr(counts, key), word) for key, word in STATES]
    states = ", ".join(f"{n} {word}" for n, word in tallies if n)
    lines.append(f"  trials    {states or 'none yet'}")
    for index, (reason, n) in enumerate(outcomes.failures):
        lines.append(f"  {'failures' if index == 0 else '':<8}  {n} × {reason}")
    if best is None:
        lines.append("  best      no completed trial yet")
    else:
        params = compact_params(best.params, searched_names(spec))
        lines.append(
            f"  best trial {best.number}: {best.metric} = {best.value:.4f}"
            + interval_words(best)
            + (f" ({params})" if params else "")
        )
    queued = counts.waiting and not interrupted
    full = finished >= spec.n_trials  # no worker takes a queued trial then: it would loop
    if queued and full:
        lines.append(
            f"  queued    {counts.waiting} waiting, but the study holds its n_trials; raise "
            f"it (--set n_trials={finished + counts.waiting}) to run them"
        )
    elif queued:
        lines.append(
            f"  queued    {counts.waiting} not started before the run ended; the next "
            "`hpo tune` runs them first"
        )
    budget = timeout if timeout is not None else spec.timeout
    short = ended_cleanly and budget and not queued and finished < spec.n_trials
    if short:  # a clean exit short of n_trials: only the time budget stops workers so
        lines.append(
            f"  budget    the time budget ({_duration_flag(budget)}) ended the run "
            f"{spec.n_trials - finished} trial{'s' * (spec.n_trials - finished > 1)} short of "
            "n_trials; the next `hpo tune` goes on"
        )
    resume = (
        _tune_command(spec_path, overrides, workers, timeout)
        if interrupted or (queued and not full) or short
        else None
    )
    lines += _next_commands(study.study_name, resume, spec.storage)
    return lines


def _started_since(study, seconds: float) -> bool:
    """Whether a trial of ``study`` started in the last ``seconds`` (this run's time): Optuna
    records a trial's start in local time, as ``datetime.now`` reads it."""
    since = datetime.now() - timedelta(seconds=seconds)
    return any(
        t.datetime_start and t.datetime_start >= since for t in study.get_trials(deepcopy=False)
    )


def _unreadable(
    study, seconds: float, interrupted: bool, problem: DatabaseProblem, storage: StorageUrl
) -> str:
    """The summary, in one line, of a run whose database refuses or lost the study as it ends:
    the workers have said what became of their trials."""
    how = "stopped after" if interrupted else "ran for"
    said = f"study {study.study_name!r} {how} {duration(seconds)}; its trials cannot be read: "
    if problem.gone:
        return said + str(problem)
    status = shlex.join(["hpo", "status", study.study_name, *_storage_flag(storage)])
    return (
        f"{said}{problem}; once it answers, `{status}` shows them and `hpo tune` resumes the "
        "study, re-queueing any trial this run left RUNNING"
    )


def _tune_command(
    spec_path: str, overrides: Sequence[str], workers: int, timeout: float | None
) -> list[str]:
    """The `hpo tune` that ran, to run again: its workers, `--set`s and time budget."""
    again = ["--workers", str(workers)] if workers > 1 else []
    sets = [word for override in overrides for word in ("--set", override)]
    budget = ["--timeout", _duration_flag(timeout)] if timeout is not None else []
    return ["hpo", "tune", spec_path, *again, *sets, *budget]


def _duration_flag(seconds: float) -> str:
    """``seconds`` as `--timeout` reads it back: 2h, 90m or 45s."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:g}s"


def _storage_flag(storage: StorageUrl) -> list[str]:
    """``--storage URL`` (redacted) where a bare command would look elsewhere."""
    bare = StorageUrl.resolve(None)
    return [] if bare is not None and bare.text == storage.text else ["--storage", str(storage)]


def _next_commands(name: str, resume: list[str] | None, storage: StorageUrl) -> list[str]:
    """``resume`` (the `hpo tune` to run again, if any), then `hpo best/dashboard/finalize
    NAME`: each finds the study's spec in the study. The storage is named where a bare command
    would look elsewhere (``--storage`` or the spec's own), redacted: a password never shows."""
    flag = _storage_flag(storage)
    commands = [[*resume, *flag]] if resume else []
    commands += [
        ["hpo", "best", name, *flag],  # every parameter and metric of the best trial
        ["hpo", "dashboard", name, *flag],
        ["hpo", "finalize", name, *flag],  # retrain the best, score it on test
    ]
    return [
        f"  {'next' if index == 0 else '':<8}  {shlex.join(words)}"
        for index, words in enumerate(commands)
    ]
