"""What bounds the real job: the encoder or the posts? The standard recipe trains on a share of
the training posts (``train_share``: stratified, fixed by the split seed, the whole schedule;
validation and test stay whole) on the same seeds and split, and each run is scored once on
test at the fixed 0.5, with a 95% bootstrap interval over test posts. The gain per doubling of
the training posts (the whole set against its half, paired on seeds and test posts) says what
more annotated posts would buy where a better search cannot reach. A share trains fewer steps
than the whole set in the same epochs, so the half and the whole set also train twice the
epochs (the half then takes the whole set's optimizer steps): what the posts buy with the steps
held equal, and what more steps buy each.

    python -m bench.run --only learning_curve --data-dir ../shared/redsm5 --max-length 256
"""

from __future__ import annotations

import math
import statistics

from bench.common import RUNS
from bench.portfolio_moves import paired_gain, scored
from bench.results import write_results
from bench.trainings import settings, train_all
from bench.workload import (
    RECIPE,
    SPLIT,
    data_words,
    encoder_path,
    measured_data,
)

NAME = "learning_curve"
DEFINITION = (
    "test post macro-F1 at the fixed 0.5 of the standard recipe trained on a share of the "
    "training posts (validation and test whole), on the same seeds and split"
)
SHARES = (0.25, 0.5, 1.0)  # the curve, each at the recipe's epochs
LONGER = (0.5, 1.0)  # these shares also at twice the epochs: the half at the whole set's steps
DEFAULTS = {"seeds": 3}


def measure(args) -> None:
    encoder, encoder_name = encoder_path()
    data_dir, real, tag = measured_data("learning-curve", args)
    arms = [*((share, 1) for share in reversed(SHARES)), *((share, 2) for share in LONGER)]
    jobs = [  # seed by seed, the largest share first: a run cut short still has whole curves
        (seed, arm, _settings(encoder, data_dir, args.max_length, tag, seed, *arm))
        for seed in range(args.seeds)
        for arm in arms
    ]
    train_all([job for _, _, job in jobs], args.parallel, args.threads, NAME)
    runs = {_label(*arm): [] for arm in sorted(arms)}
    decisions = {arm: [] for arm in arms}
    truth = None
    for seed, arm, job in jobs:
        config, data, truth, decided, figures = scored(job)
        decisions[arm].append(decided)
        run = {
            "seed": seed,
            "train_posts": len(set(data.train.post_ids)),
            "epochs": config.epochs,
            **figures,
        }
        runs[_label(*arm)].append(run)
        print(f"[{NAME}] seed {seed} {_label(*arm)}: {run}", flush=True)
    whole, half, half_long, whole_long = (
        decisions[arm] for arm in ((1.0, 1), (0.5, 1), (0.5, 2), (1.0, 2))
    )
    curve = {_label(share): runs[_label(share)] for share in SHARES}
    write_results(
        f"{NAME}_real" if real else NAME,
        {
            "encoder": encoder_name,
            "data": data_words(args.data_dir, args.posts, SPLIT)
            + ("" if real else f", clarity {args.clarity}")
            + ", one split for every run",
            "recipe": {**RECIPE, "max_length": args.max_length, "threshold": "fixed"},
            "shares": list(SHARES),
            "longer": [f"{share:.0%} of the posts at 2x the recipe's epochs" for share in LONGER],
            "parallel": f"{args.parallel} runs at a time, {args.threads} thread(s) each",
        },
        runs,
        "test_post_macro_f1",
        definition=DEFINITION,
        also=("validation_post_macro_f1", "wall_s"),
        details={
            # the whole training set against its half: what one doubling of the posts bought
            "paired_gain_of_doubling": paired_gain(truth, whole, half),
            # the same doubling with the optimizer steps held equal: what the posts alone bought
            "paired_gain_of_doubling_same_steps": paired_gain(truth, whole, half_long),
            # the epochs doubled: what more steps alone bought, on the half and on the whole set
            "paired_gain_of_the_steps": paired_gain(truth, half_long, half),
            "paired_gain_of_the_steps_whole_set": paired_gain(truth, whole_long, whole),
            "validation_gain_per_doubling": _per_doubling(curve, "validation_post_macro_f1"),
            "test_gain_per_doubling": _per_doubling(curve, "test_post_macro_f1"),
            "test_posts": int(len(truth)),
        },
        fewer_runs=None
        if args.seeds >= 5
        else {
            "at_least": args.seeds,
            "why": f"{args.seeds} seeds: each trains the recipe {len(arms)} times; the "
            "uncertainty that decides the doubling's gain is its paired interval over test "
            "posts (details), not the spread over seeds",
        },
        command=f"python -m bench.run --only {NAME} --max-length {args.max_length} --seeds "
        f"{args.seeds} --parallel {args.parallel} --threads {args.threads}"
        + (f" --data-dir {args.data_dir}" if real else f" --posts {args.posts}"),
        data_dir=data_dir,
    )


def _label(share: float, epochs_times: int = 1) -> str:
    """An arm's name: its share of the training posts, and its epochs where not the recipe's."""
    more = f", {epochs_times}x the epochs" if epochs_times > 1 else ""
    return f"{share:.0%} of the training posts{more}"


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


def _settings(
    encoder, data_dir, max_length: int, tag: str, seed: int, share: float, epochs_times: int
) -> dict:
    longer = f"-epochs{epochs_times}x" if epochs_times > 1 else ""
    folder = RUNS / "learning-curve" / f"{tag}-share{share}{longer}-s{seed}"
    point = {"train_share": share} if share < 1 else {}
    if epochs_times > 1:
        point["epochs"] = RECIPE["epochs"] * epochs_times
    return settings(
        encoder, data_dir, max_length, seed, point, folder, RUNS / "learning-curve-cache"
    )
