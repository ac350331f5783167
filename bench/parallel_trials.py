"""P4 (parallel trials) and P2 (trial set-up), from the same runs: trials/hour of 2 workers
against 1 worker at the default thread split (cores / workers), from the trials' own start and
end times, with single-thread efficiency beside it; P2 from the 1-worker runs.

    python -m bench.run --only p4      # or --only p2: the same runs write both files
"""

from __future__ import annotations

import optuna

from bench.common import RUNS, Headline, hpo_cmd, timed_run, write_headlines
from bench.workload import described, encoder_path, service_spec, small_sample

NAME = "p4"  # also writes p2.json from the 1-worker runs
DEFINITION = (
    "trials/hour of hpo tune --workers 2 over trials/hour of --workers 1, each at the default "
    "thread split (cores / workers), from the trials' own start and end times"
)
TRIAL_SETUP = (
    "a trial's start to its first optimizer step (setup_seconds), the slowest of a worker's "
    "later trials (its first trial tokenizes the data)"
)
HEADLINES = (
    Headline(
        NAME,
        "2 workers / 1 worker",
        "ratio",
        {"at_least": 0.9},
        DEFINITION,
        (
            "single_thread_efficiency",
            "trials_per_hour 1 worker",
            "trials_per_hour 2 workers",
            "trials_per_hour 1 worker, 1 thread",
        ),
    ),
    Headline(
        "p2", "1 worker", "later_trials_max_s", {"at_most": 0.5}, TRIAL_SETUP, ("first_trial_s",)
    ),
)
TRIALS = 4  # per run
SETUPS = {
    "1 worker": ["--workers", "1"],
    "2 workers": ["--workers", "2"],
    "1 worker, 1 thread": ["--workers", "1", "--threads", "1"],
}


def measure(args) -> None:
    """``args.runs`` rounds of the three setups, the order alternating; writes p4.json and
    p2.json."""
    encoder, encoder_name = encoder_path()
    data_dir, data = small_sample(args.data_dir)
    storage = f"sqlite:///{RUNS / 'p4.db'}"
    (RUNS / "p4.db").unlink(missing_ok=True)
    rounds, p2_runs = [], []
    for round_no in range(args.runs):
        rate = {}
        order = list(SETUPS) if round_no % 2 == 0 else list(SETUPS)[::-1]
        for setup in order:
            name = f"p4-{setup.replace(' ', '').replace(',', '-')}-{round_no}"
            spec = service_spec(name, data_dir, encoder, TRIALS, storage)
            timed_run(hpo_cmd("tune", spec, *SETUPS[setup], "--no-progress"))
            done = optuna.load_study(study_name=name, storage=storage).get_trials(
                states=(optuna.trial.TrialState.COMPLETE,)
            )
            span = max(t.datetime_complete for t in done) - min(t.datetime_start for t in done)
            rate[setup] = len(done) / span.total_seconds() * 3600
            if setup == "1 worker":
                p2_runs.append(_setup_seconds(done))
        rounds.append(
            {
                "order": order,
                **{f"trials_per_hour {k}": v for k, v in rate.items()},
                "ratio": rate["2 workers"] / rate["1 worker"],
                "single_thread_efficiency": rate["2 workers"] / (2 * rate["1 worker, 1 thread"]),
            }
        )
        print(f"[p4 round {round_no + 1}] {rounds[-1]['ratio']:.2f}x", flush=True)
    load = described(
        encoder_name,
        data,
        shape=f"{TRIALS} trials per run, criteria multilabel, 1 epoch, max_length "
        "128, batch 16, float32",
        rounds=f"{args.runs} rounds; each runs 1 worker, 2 workers and 1 worker with "
        "1 thread, alternating the order",
    )
    runs = {NAME: rounds, "p2": p2_runs}
    write_headlines(HEADLINES, runs, load, f"python -m bench.run --only {NAME}")


def _setup_seconds(done: list) -> dict:
    """P2 of one 1-worker run: its first trial's set-up and the slowest of the later ones'."""
    later = [t.user_attrs["setup_seconds"] for t in sorted(done, key=lambda t: t.number)[1:]]
    first = min(done, key=lambda t: t.number).user_attrs["setup_seconds"]
    return {"later_trials_max_s": max(later), "first_trial_s": first, "later_trials_s": later}
