"""Is the realistic sample as hard as the real set? The standard recipe's validation post
macro-F1 on generated posts at a given clarity (``hpo.fixtures.realistic.CLARITY``: the share of
symptom evidence phrased in the symptom's own words), against the real job's 0.55-0.70.

    python -m bench.run --only calibration              # the issue's full size, 5 seeds
    python -m bench.run --only calibration --posts 500 --max-length 128 --epochs 2 \\
        --clarity 0.3 0.5 0.7 --name calibration_probe

The recipe is bench/workload.py's RECIPE (lr 1e-4, batch 16, balanced weighting, head_tail,
4 epochs, threshold fixed at 0.5, criteria multilabel), trained in this process on the
real split fractions (0.8 / 0.1 / 0.1 by post), at the spec's default mixed_precision (auto: bf16
on a CPU with native bf16 units); each run draws the data and the training with
a new seed. A smaller proxy (fewer posts, max_length 128, 2 epochs) shows how the knob moves
the score in minutes; the full size confirms it with the exact recipe.
"""

from __future__ import annotations

import copy
import time

from bench.common import RUNS
from bench.results import load_all, write_results
from bench.workload import (
    RECIPE,
    encoder_path,
    recipe_config,
    sample_data,
    saved_probabilities,
    scored_at_half,
)
from hpo.fixtures.realistic import CLARITY, REAL_POSTS

NAME = "calibration"
REAL_RANGE = (0.55, 0.70)  # the real job's validation post macro-F1 (NOTES.md, two seeds)
DEFINITION = (
    "validation post macro-F1 of the standard recipe on generated realistic posts at each "
    "clarity (share of symptom evidence in the symptom's own words); the real job reaches "
    f"{REAL_RANGE[0]}-{REAL_RANGE[1]}"
)
# the real job's tokens and epochs; clarity a list: one case each
DEFAULTS = {"max_length": 256, "epochs": RECIPE["epochs"], "clarity": [CLARITY], "name": NAME}


def calibration_run(
    encoder: str,
    clarity: float,
    posts: int,
    max_length: int,
    epochs: int,
    seed: int,
    precision: str = "auto",
) -> dict:
    """One standard-recipe training on a fresh sample; its validation post macro-F1."""
    from hpo.train.loop import train

    case = f"{posts}-c{clarity}-s{seed}"
    data = sample_data(f"calibration/{case}", posts, seed=seed, clarity=clarity)
    model = RUNS / "calibration-models" / f"{case}-{max_length}-e{epochs}-{precision}"
    config = recipe_config(
        encoder,
        data,
        max_length,
        seed,
        mixed_precision=precision,
        epochs=epochs,
        checkpoint_dir=str(model),
    )
    started = time.perf_counter()
    result = train(config)
    wall = time.perf_counter() - started
    # the test split scored once, as the real job's is: issue #56 asks the recipe's test
    # figure on the sample to land within 0.05 of the real one
    at_half = scored_at_half(*saved_probabilities(config, [model]))
    return {
        "seed": seed,
        "validation_post_macro_f1": round(result.value, 4),
        "test_post_macro_f1": at_half["test_post_macro_f1"],
        "test_interval": at_half["test_interval"],
        "best_epoch": result.best_epoch,
        "validation_post_micro_f1": round(result.metrics.get("post_micro_f1", float("nan")), 4),
        "train_samples_per_s": round(result.train_samples_per_second, 2),
        "wall_s": round(wall, 1),
    }


def measure(args) -> None:
    """``args.runs`` seeds (from ``args.first_seed``) of every clarity, each written as it ends."""
    encoder, encoder_name = encoder_path()
    for seed in range(args.first_seed, args.first_seed + args.runs):
        # seeds outermost: a cut-short run still covers every case
        for clarity in args.clarity:
            run = calibration_run(
                encoder, clarity, args.posts, args.max_length, args.epochs, seed, args.precision
            )
            print(f"[calibration] clarity {clarity} seed {seed}: {run}", flush=True)
            # written after every run, with the file's earlier runs of the same workload: a
            # run cut short, or several processes sharing the cases, lose nothing finished
            _record(args, encoder_name, f"clarity {clarity}", run)


def _record(args, encoder_name: str, case: str, run: dict) -> None:
    full = (args.posts, args.max_length, args.epochs) == (REAL_POSTS, 256, RECIPE["epochs"])
    workload = {
        "encoder": encoder_name,
        "data": f"{args.posts} generated realistic posts per run (seed = run), split "
        "0.8/0.1/0.1 by post",
        "recipe": {
            **RECIPE,
            "epochs": args.epochs,
            "max_length": args.max_length,
            "mixed_precision": args.precision,
        },
        "size": "the issue's full size and exact recipe"
        if full
        else "a smaller, faster proxy (fewer posts, shorter texts or fewer epochs)",
        "real_range": list(REAL_RANGE),
        "scored": "validation at the best epoch; test once, at 0.5, with its 95% interval",
    }
    earlier = load_all().get(args.name)
    same = earlier and {k: earlier["workload"].get(k) for k in workload} == workload
    runs = copy.deepcopy(earlier["runs"]) if same else {}
    runs.setdefault(case, []).append(run)
    fewest = min(len(case_runs) for case_runs in runs.values())
    write_results(
        args.name,
        workload,
        runs,
        "validation_post_macro_f1",
        definition=DEFINITION,
        also=("test_post_macro_f1", "wall_s"),
        # judged where it counts: the shipped clarity at the size and recipe
        target={"key": f"clarity {CLARITY}", "within": list(REAL_RANGE)}
        if full and f"clarity {CLARITY}" in runs
        else None,
        fewer_runs=None
        if fewest >= 5
        else {
            "at_least": fewest,
            "why": "one run of the recipe at the real size is 15-30 minutes of a quiet 2-core "
            "machine and hours on a loaded one; runs are recorded as they finish",
        },
        command=f"python -m bench.run --only calibration --posts {args.posts} --max-length "
        f"{args.max_length} --epochs {args.epochs} --precision {args.precision} --clarity "
        + " ".join(sorted(c.split()[1] for c in runs))
        + (f" --name {args.name}" if args.name != NAME else ""),
    )
