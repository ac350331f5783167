"""What glibc's allocator settings cost a CPU trial: before and after f9aac69.

    python -m bench.malloc_thresholds --repeats 5    # ~25 min on a quiet 2-core machine

Before f9aac69 a worker's host-memory ceiling also fixed glibc's mmap and trim thresholds at
1 MiB, so its resident set tracked live memory: every activation was mapped afresh and its
pages faulted in again at each step. Since then glibc keeps its defaults (freed heap is reused)
and the ceiling hands the freed heap back only when it is reached. This bench runs the same
``hpo tune`` from a checkout of the commit before and from this one, alternating the order by
repeat: the real job's shape on the calibrated realistic sample (all-MiniLM-L6-v2, criteria
multilabel, the standard recipe, head_tail at 256 tokens, batch 16, float32), 300 posts split
0.8 / 0.1 / 0.1, two trials of 2 epochs run by two workers at once (one thread each), as the
real job's two workers share two cores.

Per run: the trials' median wall seconds (set-up, training and validation), their training
examples per second and the worker's peak resident set (the trial's ``peak_memory_mb``), and
the trials' values, which must match between the two: the allocator may change the time, not
the arithmetic. Across repeats: each side's median and after / before paired by repeat with a
95% interval.
"""

from __future__ import annotations

import argparse
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
    write_spec,
)
from bench.results import MACHINE_USE, commit, write_results
from bench.search_budget import RECIPE, mean_interval

NAME = "malloc_thresholds"
DEFINITION = (
    "median wall seconds of a trial (set-up, 2 epochs of training and validation) of the real "
    "job's shape, two workers at once on 2 cores, with glibc's thresholds fixed at 1 MiB "
    "(before f9aac69) and at glibc's defaults (after); after / before paired by repeat"
)
BEFORE = "f9aac69^"
POSTS, FRACTIONS = 300, (0.8, 0.1, 0.1)
STORAGE = f"sqlite:///{RUNS / 'malloc_thresholds.db'}"


def spec(rule: str, repeat: int, encoder: str, data: str) -> tuple[str, Path]:
    name = f"malloc-{rule}-{repeat}"
    recipe = {key: value for key, value in RECIPE.items() if key != "head_dropout"}
    return name, write_spec(
        name,
        task="criteria",
        data_dir=data,
        metric="post_macro_f1",
        n_trials=2,
        storage=STORAGE,
        output_dir=str(RUNS / "studies"),
        keep_top_k=0,
        sampler={"name": "tpe", "seed": repeat},  # the same two trials on both sides
        pruner={"name": "none"},
        train={
            **recipe,
            "epochs": 2,
            "encoder": encoder,
            "max_length": 256,
            "split_fractions": list(FRACTIONS),
            "criteria_formulation": "multilabel",
            "mixed_precision": "no",
            "threshold": "fixed",
            "seed": repeat,
            "cache_dir": str(RUNS / "cache"),
        },
        search_space={"head_dropout": {"type": "float", "low": 0.0, "high": 0.3}},
    )


def run_rule(rule: str, checkout: Path, repeat: int, encoder: str, data: str) -> dict:
    name, path = spec(rule, repeat, encoder, data)
    tune_s, _ = timed_run(
        hpo_cmd("tune", str(path), "--workers", "2", "--no-progress"), timeout=3600, cwd=checkout
    )
    trials = optuna.load_study(study_name=name, storage=STORAGE).trials
    attrs = [t.user_attrs for t in trials]
    return {
        "repeat": repeat,
        "trial_s": round(statistics.median(a["wall_seconds"] for a in attrs), 2),
        "train_examples_per_s": round(
            statistics.mean(a["train_samples_per_second"] for a in attrs), 2
        ),
        "peak_rss_mb": max(a["peak_memory_mb"] for a in attrs),
        "tune_s": round(tune_s, 1),
        "values": sorted(round(t.value, 6) for t in trials),
        "commit": commit(checkout),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", default=BEFORE, help="the commit whose allocator is 'before'")
    parser.add_argument("--machine-use", help="what else ran on the machine meanwhile")
    args = parser.parse_args()
    if args.machine_use:
        MACHINE_USE["text"] = args.machine_use
    Path(STORAGE.removeprefix("sqlite:///")).unlink(missing_ok=True)
    encoder, encoder_name = encoder_path()
    data = sample_data(f"data-{POSTS}", POSTS)
    runs = before_and_after(
        NAME,
        args.before,
        args.repeats,
        lambda side, checkout, repeat: run_rule(side, checkout, repeat, encoder, data),
    )
    pairs = list(zip(runs["before"], runs["after"], strict=True))
    ratios = [a["trial_s"] / b["trial_s"] for b, a in pairs]
    low, high = mean_interval(ratios)
    write_results(
        NAME,
        {
            "encoder": encoder_name,
            "data": data_words(None, POSTS, FRACTIONS),
            "shape": "the standard recipe, criteria multilabel, head_tail at 256 tokens, batch "
            "16, float32, 2 epochs; hpo tune --workers 2 (one thread each), 2 trials",
        },
        runs,
        "trial_s",
        definition=DEFINITION,
        also=("train_examples_per_s", "peak_rss_mb", "tune_s"),
        details={
            "after_over_before": round(statistics.mean(ratios), 3),
            "after_over_before_interval": [low, high],
            "verdict": "faster" if high < 1 else "slower" if low > 1 else "no difference shown",
            "same_values": all(b["values"] == a["values"] for b, a in pairs),
        },
        command=f"python -m bench.malloc_thresholds --repeats {args.repeats}",
    )


if __name__ == "__main__":
    main()
