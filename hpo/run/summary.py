"""What ``hpo tune`` says when it ends: how the trials ended (failures grouped by reason), how
long it ran, the best value, and the commands to run next."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from hpo.run.trial_line import compact_params, duration, searched_names
from hpo.spec import load_spec
from hpo.storage_url import StorageUrl
from hpo.study import best_trial, trial_outcomes

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
) -> list[str]:
    """The summary's lines. ``storage``: the ``--storage`` flag as given; ``interrupted``: Ctrl-C
    (or SIGTERM) stopped the run, so the first command resumes it."""
    spec = load_spec(spec_path, overrides, storage)
    outcomes, best = trial_outcomes(study), best_trial(study)
    counts = outcomes["counts"]
    finished = counts["complete"] + counts["pruned"]
    how = "stopped after" if interrupted else "ran for"
    lines = [
        f"study {study.study_name!r} {how} {duration(seconds)}: "
        f"{finished} of {spec.n_trials} trials finished"
    ]
    states = ", ".join(f"{counts[key]} {word}" for key, word in STATES if counts[key])
    lines.append(f"  trials    {states or 'none yet'}")
    for index, (reason, n) in enumerate(outcomes["failures"]):
        lines.append(f"  {'failures' if index == 0 else '':<8}  {n} × {reason}")
    if best is None:
        lines.append("  best      no completed trial yet")
    else:
        params = compact_params(best["params"], searched_names(spec))
        lines.append(
            f"  best trial {best['number']}: {best['metric']} = {best['value']:.4f}"
            + (f" ({params})" if params else "")
        )
    lines += _next_commands(
        study.study_name, spec_path, overrides, spec.storage, workers, interrupted
    )
    return lines


def _next_commands(
    name: str,
    spec_path: str,
    overrides: Sequence[str],
    storage: StorageUrl,
    workers: int,
    interrupted: bool,
) -> list[str]:
    """`hpo best/dashboard/finalize NAME`: each finds the study's spec in the study. The
    storage is named where a bare command would look elsewhere (``--storage`` or the spec's
    own), redacted: a password never shows."""
    bare = StorageUrl.resolve(None)
    flag = [] if bare is not None and bare.text == storage.text else ["--storage", str(storage)]
    commands = []
    if interrupted:  # resuming runs the re-queued trials first
        again = ["--workers", str(workers)] if workers > 1 else []
        sets = [word for override in overrides for word in ("--set", override)]
        commands.append(["hpo", "tune", spec_path, *again, *sets, *flag])
    commands += [
        ["hpo", "best", name, *flag],  # every parameter and metric of the best trial
        ["hpo", "dashboard", name, *flag],
        ["hpo", "finalize", name, *flag],  # retrain the best, score it on test
    ]
    return [
        f"  {'next' if index == 0 else '':<8}  {shlex.join(words)}"
        for index, words in enumerate(commands)
    ]
