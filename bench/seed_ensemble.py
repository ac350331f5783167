"""Does averaging seeds help? ``hpo finalize --seeds 2`` averages the chosen configuration's
seeds by default (``--ensemble seeds``). Here the standard recipe trains on K seeds of one
calibrated realistic sample (the same data and split for every seed); each seed alone and each
pair of seeds averaged is scored on validation and on test, at the fixed 0.5 and at thresholds
tuned on validation, with a 95% bootstrap interval over test posts. A pair's gain is its test
post macro-F1 minus the mean of its two members' (the same posts, so paired).

    python -m bench.run --only seed_ensemble             # 600 posts, 128 tokens, 5 seeds
"""

from __future__ import annotations

import itertools
import statistics
import time

import numpy as np

from bench.common import RUNS
from bench.results import write_results
from bench.workload import (
    RECIPE,
    SPLIT,
    data_words,
    encoder_path,
    measured_data,
    recipe_config,
    saved_probabilities,
    scored_at_half,
)

NAME = "seed_ensemble"
DEFINITION = (
    "test post macro-F1 of the standard recipe: each seed alone, and each pair of seeds "
    "averaged (finalize's --ensemble seeds), at the fixed 0.5 and at validation-tuned thresholds"
)

TIMING = "wall_s.txt"  # beside each model: its training's seconds, for a rerun that rescores
DEFAULTS = {"posts": 600}  # so that five seeds fit about an hour of a 2-core machine


def _config(encoder: str, data: str, max_length: int, seed: int, folder):
    return recipe_config(
        encoder,
        data,
        max_length,
        seed,
        split_seed=0,  # one split for every seed: the seeds differ in training alone
        checkpoint_dir=str(folder),
        cache_dir=str(RUNS / "seed-ensemble-cache"),
    )


def _scores(data, probs: dict[str, np.ndarray], tuned: dict[str, float]) -> dict:
    """Validation and test post macro-F1 at 0.5 and at ``tuned``, and test's interval at 0.5."""
    from hpo.train.evaluate import metrics_at

    found = scored_at_half(data, probs)
    for split_name in ("validation", "test"):
        value = metrics_at(getattr(data, split_name), probs[split_name], tuned)["post_macro_f1"]
        found[f"{split_name}_post_macro_f1_tuned"] = round(value, 4)
    return found


def measure(args) -> None:
    from hpo.train.evaluate import score
    from hpo.train.loop import train

    encoder, encoder_name = encoder_path()
    data_dir, real, tag = measured_data("seed-ensemble", args)
    probs, configs, walls = {}, {}, {}
    for seed in range(args.seeds):
        folder = RUNS / "seed-ensemble" / f"model-{tag}-s{seed}"
        config = _config(encoder, data_dir, args.max_length, seed, folder)
        timing = folder / TIMING
        if not (folder / "classifier.json").exists():
            started = time.perf_counter()
            train(config)
            timing.write_text(f"{time.perf_counter() - started:.1f}\n")
        walls[seed] = float(timing.read_text())  # the training's, kept with its model
        data, probs[seed] = saved_probabilities(config, [folder])
        configs[seed] = (config, data)
        print(f"[seed_ensemble] seed {seed} trained and scored ({walls[seed]} s)", flush=True)
    config, data = configs[0]
    singles, pairs = [], []
    for seed in range(args.seeds):
        tuned = score(data.validation, probs[seed]["validation"]).thresholds
        singles.append(
            {"seeds": [seed], **_scores(data, probs[seed], tuned), "wall_s": walls[seed]}
        )
    by_seed = {run["seeds"][0]: run for run in singles}
    for a, b in itertools.combinations(range(args.seeds), 2):
        averaged = {name: (probs[a][name] + probs[b][name]) / 2 for name in ("validation", "test")}
        tuned = score(data.validation, averaged["validation"]).thresholds
        run = {"seeds": [a, b], **_scores(data, averaged, tuned)}
        for figure in ("test_post_macro_f1", "test_post_macro_f1_tuned"):
            members = statistics.fmean([by_seed[a][figure], by_seed[b][figure]])
            run[f"gain_over_members{figure.removeprefix('test_post_macro_f1')}"] = round(
                run[figure] - members, 4
            )
        pairs.append(run)
        print(f"[seed_ensemble] seeds {a}+{b}: {run}", flush=True)
    write_results(
        f"{NAME}_real" if real else NAME,
        {
            "encoder": encoder_name,
            "data": (
                data_words(args.data_dir, args.posts, SPLIT)
                + ("" if real else f", clarity {args.clarity}")
                + ", one split for every seed"
            ),
            "recipe": {**RECIPE, "max_length": args.max_length, "threshold": "fixed"},
            "size": "the real size"
            if (real or args.posts >= 1484) and args.max_length >= 256
            else "a smaller share (fewer posts or shorter texts) so that the seeds fit an hour",
        },
        {"one seed": singles, "two seeds averaged": pairs},
        "test_post_macro_f1",
        definition=DEFINITION,
        also=(
            "validation_post_macro_f1",
            "test_post_macro_f1_tuned",
            "gain_over_members",
            "gain_over_members_tuned",
        ),
        fewer_runs=None
        if args.seeds >= 5
        else {
            "at_least": args.seeds,
            "why": f"{args.seeds} seeds: each a full training of the recipe "
            f"({round(min(walls.values()) / 60)}-{round(max(walls.values()) / 60)} min at "
            f"{args.max_length} tokens here, on a shared 2-core CPU); they give "
            f"{len(pairs)} paired gains",
        },
        command=f"python -m bench.run --only {NAME} --posts {args.posts} --max-length "
        f"{args.max_length} --seeds {args.seeds} --clarity {args.clarity}"
        + (f" --data-dir {args.data_dir}" if args.data_dir else ""),
        data_dir=data_dir,
    )
