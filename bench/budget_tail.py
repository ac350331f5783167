"""What a time budget's tail buys: the rule for starting a trial late, before and after.

    python -m bench.budget_tail --repeats 5     # ~55 min on a quiet 2-core machine

On the real job a 60-minute ``hpo tune --timeout`` with ~35-minute trials stopped both workers
at minute 35: no trial started unless a whole median trial fit in the time left (issue #35).
Since b086acf a worker starts one when the time left fits the epochs to the pruner's first rung
at the study's median pace. This bench runs the same search under both rules: the search_budget
bench's (c) arm at its mid share (the calibrated realistic sample, 500 posts split as the real
set, 128 tokens, ``sampler: auto`` with the recipe as warm start, Hyperband from epoch 2, two
workers), once from a checkout of the commit before the change and once from this one, the same
seeds and data, the order alternating by repeat. The ``--timeout`` keeps the real job's ratio of
budget to trial, 60 min over ~35 min (1.71; the two trials took 2,015 s and 2,184 s): here the
first two trials take ~200 s (measured: the runs record it), so 340 s. At the search_budget mid
share's 5 minutes (1.5 trials) the tail was just under the two epochs to the first rung.

Per run: the configurations that reached the first rung (a value reported at epoch 2), the
trials started, ``hpo tune``'s wall seconds, how far past the deadline its last trial ended
(the budget ends running trials at an epoch's end, kept) and the best validation post macro-F1
(recorded, not a claim: it is not scored on test). Across repeats: each rule's median, and
after - before in configurations at the first rung, paired by repeat, with a 95% interval.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import statistics
from pathlib import Path

import optuna

from bench.common import (
    RUNS,
    before_and_after,
    data_words,
    encoder_path,
    hpo_cmd,
    sample_data,
    timed_run,
)
from bench.results import MACHINE_USE, commit, write_results
from bench.search_budget import SHARES, STORAGE, mean_interval, spec
from hpo.study import study_deadline

NAME = "budget_tail"
DEFINITION = (
    "configurations that reached the first rung (epoch 2) in one hpo tune --timeout 340s with two "
    "workers, under the rule before b086acf (a whole median trial must fit) and after (the "
    "epochs to the first rung must fit); after - before paired by repeat, with a 95% interval"
)
BEFORE = "b086acf^"  # the commit before the rule changed
FIRST_RUNG = 2  # Hyperband's min_resource in search_budget's spec, in epochs
SHARE = SHARES["mid"]
BUDGET_S = 340  # 1.71 x the ~200 s these trials take with two workers: the real hour's ratio
DONE = RUNS / NAME  # each finished run, so a bench cut short goes on from there (--resume)


def run_rule(rule: str, checkout: Path, repeat: int, encoder: str, data: str) -> dict:
    """One search under ``rule`` (the code of ``checkout``) and what it got to."""
    name, path = spec("c_issue35", repeat, encoder, data, SHARE, name=f"tail-{rule}-{repeat}")
    done = DONE / f"{name}.json"
    if done.exists():
        return json.loads(done.read_text())
    tune_s, _ = timed_run(
        hpo_cmd("tune", path, "--workers", "2", "--timeout", f"{BUDGET_S}s", "--no-progress"),
        timeout=3600,
        cwd=checkout,
    )
    study = optuna.load_study(study_name=name, storage=STORAGE)
    started = [t for t in study.trials if t.state.name != "WAITING"]
    ends = [t.datetime_complete.timestamp() for t in started if t.datetime_complete]
    complete = [t for t in started if t.state.name == "COMPLETE"]
    values = [t.value for t in complete]
    full = [t.user_attrs["wall_seconds"] for t in complete if "stopped_by" not in t.user_attrs]
    result = {
        "repeat": repeat,
        "first_rung_configurations": sum(FIRST_RUNG in t.intermediate_values for t in started),
        "trials_started": len(started),
        "states": dict(collections.Counter(t.state.name.lower() for t in study.trials)),
        "tune_s": round(tune_s, 1),
        "past_deadline_s": round(max(ends) - study_deadline(study), 1),
        # the ratio the budget is meant to keep: it over the median trial that ran to its end
        "budget_over_trial": round(BUDGET_S / statistics.median(full), 2) if full else None,
        "best_validation_post_macro_f1": round(max(values), 4) if values else None,
        "commit": commit(checkout),
    }
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps(result, indent=2))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", default=BEFORE, help="the commit whose rule is 'before'")
    parser.add_argument("--resume", action="store_true", help="keep the runs already finished")
    parser.add_argument("--machine-use", help="what else ran on the machine meanwhile")
    args = parser.parse_args()
    if args.machine_use:
        MACHINE_USE["text"] = args.machine_use
    if not args.resume:
        shutil.rmtree(DONE, ignore_errors=True)
        Path(STORAGE.removeprefix("sqlite:///")).unlink(missing_ok=True)
    encoder, encoder_name = encoder_path()
    data = sample_data(f"data-{SHARE.posts}", SHARE.posts)
    runs = before_and_after(
        NAME,
        args.before,
        args.repeats,
        lambda rule, checkout, repeat: run_rule(rule, checkout, repeat, encoder, data),
    )
    gains = [
        a["first_rung_configurations"] - b["first_rung_configurations"]
        for b, a in zip(runs["before"], runs["after"], strict=True)
    ]
    low, high = mean_interval(gains)
    write_results(
        NAME,
        {
            "encoder": encoder_name,
            "data": data_words(None, SHARE.posts, SHARE.fractions),
            "shape": "search_budget's c_issue35 search (sampler auto, the recipe as warm start, "
            f"Hyperband from epoch 2), hpo tune --workers 2 --timeout {BUDGET_S}s",
            "share": SHARE.why.split(", a 5-minute")[0] + ")",
            "budget": "the real job's budget over trial (60 min / ~35 min = 1.71) times the ~200 s "
            "a trial takes here with two workers",
        },
        runs,
        "first_rung_configurations",
        definition=DEFINITION,
        also=(
            "trials_started",
            "tune_s",
            "past_deadline_s",
            "budget_over_trial",
            "best_validation_post_macro_f1",
        ),
        details={
            "after_minus_before": round(statistics.mean(gains), 2),
            "after_minus_before_interval": [low, high],
            "verdict": "more" if low > 0 else "fewer" if high < 0 else "no difference shown",
        },
        command=f"python -m bench.budget_tail --repeats {args.repeats}",
    )


if __name__ == "__main__":
    main()
