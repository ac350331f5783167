"""Which first move earns a few-trial budget? A study whose budget buys a few full trials runs
its warm start, then the portfolio around it (``hpo.study.search._portfolio``), in order; with two
workers and an hour (the issue's real job: ~35 min a trial) the first move is the only one that
trains at all. Here the standard recipe and every portfolio point the product makes of the
issue's real-data study (bench/workload.py's SEARCH_SPACE, epochs as issue #56's user searches
them) each train on the calibrated realistic
sample at the real post count and split, on the same seeds; each is scored once on test at the
fixed 0.5, with a 95% bootstrap interval over test posts, and against the recipe on the same
seeds and posts (the paired gain, its interval from resampling the test posts). The trainings
run ``--parallel`` at a time, each its own process of ``--threads`` threads (the real job's two
workers of one thread each); a model already trained is scored again, not retrained.

    python -m bench.run --only portfolio_moves          # 1,484 posts, 128 tokens, 3 seeds
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import numpy as np

from bench.common import RUNS
from bench.results import write_results
from bench.trainings import config_of, settings, train_all, wall_seconds
from bench.workload import (
    RECIPE,
    SEARCH_SPACE,
    SPLIT,
    data_words,
    encoder_path,
    measured_data,
    saved_probabilities,
    scored_at_half,
)

NAME = "portfolio_moves"
DEFINITION = (
    "test post macro-F1 at the fixed 0.5 of the standard recipe and of each portfolio point the "
    "product runs after it, on the same seeds and split; a move's gain is paired with the recipe"
)
# Issue #56's user searches epochs 3-5, where SEARCH_SPACE (an earlier issue's) has 2-4: the
# user's portfolio trains the recipe's 4 epochs x1.5 clipped to 5, which 2-4 drops. The moves
# before it (class weighting, learning rate) are the same in both.
PORTFOLIO_SPACE = {**SEARCH_SPACE, "epochs": {"type": "int", "low": 3, "high": 5}}
DEFAULTS = {"seeds": 3}  # each seed trains every point once
RESAMPLES, LEVEL = 2000, 0.95


def points() -> list[tuple[str, dict]]:
    """("recipe", RECIPE), then the product's portfolio of the issue's study, in its order."""
    from hpo.study.search import portfolio_points

    return [("recipe", RECIPE), *portfolio_points(study_spec())]


def study_spec():
    """The issue's real-data study (PORTFOLIO_SPACE, the recipe as warm start), few-trial."""
    from hpo.spec import StudySpec

    return StudySpec.model_validate(
        {
            "name": NAME,
            "task": "criteria",
            "data_dir": "unused",
            "n_trials": 3,
            "sampler": {"name": "auto"},
            "train": {"encoder": "unused"},
            "search_space": PORTFOLIO_SPACE,
            "warm_start": [RECIPE],
        }
    )


def _decided(data, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Test's post x symptom truth and 0/1 decisions at the fixed 0.5."""
    from hpo.train.evaluate import post_matrix

    truth, scores = post_matrix(data.test, probs)
    return truth.astype(np.int64), (scores >= 0.5).astype(np.int64)


def scored(job: dict) -> tuple:
    """A trained job rescored: its config and data, test's truth and decisions at 0.5, and what
    every run reports (``scored_at_half``'s figures and the training's seconds)."""
    config = config_of(job)
    # the data its own: a point may change what the encoder reads
    data, probs = saved_probabilities(config, [Path(config.checkpoint_dir)])
    truth, decided = _decided(data, probs["test"])
    return (
        config,
        data,
        truth,
        decided,
        {**scored_at_half(data, probs), "wall_s": wall_seconds(job)},
    )


def paired_gain(truth: np.ndarray, moved: list, recipe: list, resamples: int = RESAMPLES) -> dict:
    """The move's mean test post macro-F1 over seeds minus the recipe's on the same seeds, and
    its percentile interval over test posts resampled with replacement (both sides on the same
    resample: the pairing is what makes a small gain visible). sklearn scores, numpy resamples:
    no library bootstraps a difference of two macro-F1s over shared rows."""
    from sklearn.metrics import f1_score

    def gain(rows: np.ndarray) -> float:
        def mean_f1(decisions: list) -> float:
            return statistics.fmean(
                f1_score(truth[rows], d[rows], average="macro", zero_division=0) for d in decisions
            )

        return mean_f1(moved) - mean_f1(recipe)

    every = np.arange(len(truth))
    draws = np.random.default_rng(0).integers(0, len(truth), size=(resamples, len(truth)))
    spread = [gain(rows) for rows in draws]
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(spread, [tail, 100 - tail])
    return {"gain": round(gain(every), 4), "interval": [round(low, 4), round(high, 4)]}


def measure(args) -> None:
    encoder, encoder_name = encoder_path()
    data_dir, real, tag = measured_data("portfolio-moves", args)
    # --skip-moves: the moves another file measured already; the recipe trains again beside
    # the rest, as the paired gains need its decisions on the same seeds
    every = points()
    chosen = [every[0], *every[1 + args.skip_moves :][: args.moves]]
    # seed by seed: a run cut short still has whole rounds
    jobs = [
        (seed, label, _settings(encoder, data_dir, args.max_length, tag, seed, label, point))
        for seed in range(args.seeds)
        for label, point in chosen
    ]
    train_all([job for _, _, job in jobs], args.parallel, args.threads, NAME)
    runs = {label: [] for label, _ in chosen}
    decisions = {label: [] for label, _ in chosen}
    truth = None
    for seed, label, job in jobs:
        _, _, truth, decided, figures = scored(job)
        decisions[label].append(decided)
        run = {"seed": seed, "point": job["point"], **figures}
        runs[label].append(run)
        print(f"[{NAME}] seed {seed} {label}: {run}", flush=True)
    rounds = min(len(found) for found in decisions.values())
    recipe = decisions["recipe"][:rounds]
    gains = {
        label: paired_gain(truth, found[:rounds], recipe)
        for label, found in decisions.items()
        if label != "recipe"
    }
    minutes = round(statistics.median(r["wall_s"] for rs in runs.values() for r in rs) / 60)
    later = f"_after{args.skip_moves}" if args.skip_moves else ""
    write_results(
        (f"{NAME}_real" if real else NAME) + later,
        {
            "encoder": encoder_name,
            "data": data_words(args.data_dir, args.posts, SPLIT)
            + ("" if real else f", clarity {args.clarity}")
            + ", one split for every run",
            "recipe": {**RECIPE, "max_length": args.max_length, "threshold": "fixed"},
            "search_space": PORTFOLIO_SPACE,
            "order": [label for label, _ in chosen],
            "size": "the real post count and split at the real 256 tokens"
            if args.max_length >= 256
            else f"the real post count and split at {args.max_length} of the real 256 tokens, "
            "so that every point's seeds fit about an hour of a 2-core machine",
        },
        runs,
        "test_post_macro_f1",
        definition=DEFINITION,
        also=("validation_post_macro_f1", "wall_s"),
        details={
            "paired_gain_over_recipe": gains,
            # the hour with two workers: the recipe and the first move (absent when skipped)
            **({} if args.skip_moves else {"two_trial_search": _hour(runs, every[1][0], rounds)}),
            "seeds_paired": rounds,
            "test_posts": int(len(truth)),
            "resamples": RESAMPLES,
            "level": LEVEL,
        },
        fewer_runs=None
        if rounds >= 5
        else {
            "at_least": rounds,
            "why": f"{rounds} seeds: each is {len(chosen)} trainings of about {minutes} "
            "minutes on a 2-core machine; the uncertainty that decides a gain is the paired "
            "interval over test posts (details), not the spread over seeds",
        },
        command=f"python -m bench.run --only {NAME} --posts {args.posts} --max-length "
        f"{args.max_length} --seeds {args.seeds} --moves {args.moves}"
        + (f" --skip-moves {args.skip_moves}" if args.skip_moves else "")
        + " --parallel "
        f"{args.parallel} --threads {args.threads}"
        + (f" --data-dir {args.data_dir}" if real else f" --clarity {args.clarity}"),
        data_dir=data_dir,
    )


def _hour(runs: dict, first: str, rounds: int) -> dict:
    """The recipe and the first move, the better on validation finalized: what the hour buys."""
    picks = [
        max(("recipe", first), key=lambda label: runs[label][seed]["validation_post_macro_f1"])
        for seed in range(rounds)
    ]
    picked = [runs[label][seed]["test_post_macro_f1"] for seed, label in enumerate(picks)]
    return {
        "trials": ["recipe", first],
        "chosen_by_validation": picks,
        "test_post_macro_f1": picked,
        "gain_over_recipe": [
            round(value - runs["recipe"][seed]["test_post_macro_f1"], 4)
            for seed, value in enumerate(picked)
        ],
    }


def _settings(encoder, data_dir, max_length: int, tag: str, seed: int, label, point) -> dict:
    """One training: a point on one seed, its folder named by the point, not its place (a
    reordered portfolio reuses the right model)."""
    moved = re.sub(r"[^\w.]+", "-", label)
    folder = RUNS / "portfolio-moves" / f"{tag}-{moved}-s{seed}"
    return settings(
        encoder, data_dir, max_length, seed, point, folder, RUNS / "portfolio-moves-cache"
    )
