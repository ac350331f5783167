"""What bounds the real job: the encoder or the posts? The standard recipe trains on a share of
the training posts (``train_share``: stratified, fixed by the split seed, the whole schedule;
validation and test stay whole) on the same seeds and split, and each run is scored once on
test at the fixed 0.5, with a 95% bootstrap interval over test posts. The gain per doubling of
the training posts (the whole set against its half, paired on seeds and test posts) says what
more annotated posts would buy where a better search cannot reach.

    python -m bench.run --only learning_curve --data-dir ../shared/redsm5 --max-length 256
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from bench.common import RUNS
from bench.portfolio_moves import _decided, paired_gain
from bench.results import write_results
from bench.trainings import config_of, settings, train_all, wall_seconds
from bench.workload import (
    RECIPE,
    SPLIT,
    data_words,
    encoder_path,
    measured_data,
    saved_probabilities,
    scored_at_half,
)

NAME = "learning_curve"
DEFINITION = (
    "test post macro-F1 at the fixed 0.5 of the standard recipe trained on a share of the "
    "training posts (validation and test whole), on the same seeds and split"
)
SHARES = (0.25, 0.5, 1.0)
DEFAULTS = {"seeds": 3}


def measure(args) -> None:
    encoder, encoder_name = encoder_path()
    data_dir, real, tag = measured_data("learning-curve", args)
    jobs = [  # seed by seed, the largest share first: a run cut short still has whole curves
        (seed, share, _settings(encoder, data_dir, args.max_length, tag, seed, share))
        for seed in range(args.seeds)
        for share in reversed(SHARES)
    ]
    train_all([job for _, _, job in jobs], args.parallel, args.threads, NAME)
    runs = {_label(share): [] for share in SHARES}
    decisions = {share: [] for share in SHARES}
    truth = None
    for seed, share, job in jobs:
        config = config_of(job)
        data, probs = saved_probabilities(config, [Path(config.checkpoint_dir)])
        truth, decided = _decided(data, probs["test"])
        decisions[share].append(decided)
        run = {
            "seed": seed,
            "train_posts": len(set(data.train.post_ids)),
            **scored_at_half(data, probs),
            "wall_s": wall_seconds(job),
        }
        runs[_label(share)].append(run)
        print(f"[{NAME}] seed {seed} share {share}: {run}", flush=True)
    whole, half = decisions[1.0], decisions[0.5]
    write_results(
        f"{NAME}_real" if real else NAME,
        {
            "encoder": encoder_name,
            "data": data_words(args.data_dir, args.posts, SPLIT)
            + ("" if real else f", clarity {args.clarity}")
            + ", one split for every run",
            "recipe": {**RECIPE, "max_length": args.max_length, "threshold": "fixed"},
            "shares": list(SHARES),
            "parallel": f"{args.parallel} runs at a time, {args.threads} thread(s) each",
        },
        runs,
        "test_post_macro_f1",
        definition=DEFINITION,
        also=("validation_post_macro_f1", "wall_s"),
        details={
            # the whole training set against its half: what one doubling of the posts bought
            "paired_gain_of_doubling": paired_gain(truth, whole, half),
            "validation_gain_per_doubling": _per_doubling(runs, "validation_post_macro_f1"),
            "test_gain_per_doubling": _per_doubling(runs, "test_post_macro_f1"),
            "test_posts": int(len(truth)),
        },
        fewer_runs=None
        if args.seeds >= 5
        else {
            "at_least": args.seeds,
            "why": f"{args.seeds} seeds: each trains the recipe on {len(SHARES)} shares; the "
            "uncertainty that decides the doubling's gain is its paired interval over test "
            "posts (details), not the spread over seeds",
        },
        command=f"python -m bench.run --only {NAME} --max-length {args.max_length} --seeds "
        f"{args.seeds} --parallel {args.parallel} --threads {args.threads}"
        + (f" --data-dir {args.data_dir}" if real else f" --posts {args.posts}"),
        data_dir=data_dir,
    )


def _label(share: float) -> str:
    return f"{share:.0%} of the training posts"


def _per_doubling(runs: dict, figure: str) -> float:
    """The least-squares slope of the seeds' median ``figure`` over log2(training posts): what
    each doubling of the posts added along the whole curve."""
    x, y = zip(
        *(
            (
                math.log2(statistics.median(r["train_posts"] for r in found)),
                statistics.median(r[figure] for r in found),
            )
            for found in runs.values()
        ),
        strict=True,
    )
    slope = statistics.linear_regression(x, y).slope
    return round(slope, 4)


def _settings(encoder, data_dir, max_length: int, tag: str, seed: int, share: float) -> dict:
    folder = RUNS / "learning-curve" / f"{tag}-share{share}-s{seed}"
    return settings(
        encoder,
        data_dir,
        max_length,
        seed,
        {"train_share": share} if share < 1 else {},
        folder,
        RUNS / "learning-curve-cache",
    )
