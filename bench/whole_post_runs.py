"""One run of bench/whole_post.py's arms, each in its own process (its peak memory is its own):
an arm of the recipe trained on one seed and scored (test post macro-F1 with its interval, the
decision rules chosen on validation, recall inside and outside head_tail's window), or the
separate evidence model. Kept in _runs/bench/whole_post/ so a cut-short bench goes on from the
runs it finished.

    python -m bench.whole_post_runs --one ARM SEED DATA MAXLEN OUT     # what the measure starts
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import REPO, RUNS, child_env
from bench.post_windows import window_recall
from bench.results import commit
from bench.workload import (
    SPLIT,
    encoder_path,
    recipe_config,
    saved_probabilities,
    scored_at_half,
)

NAME = "whole_post"

ARMS = {  # what each arm sets on top of the recipe
    "head_tail": {},
    # the recipe with the real annotations' status-0 rows as hard negatives: a post-symptom cell
    # a clinician marked touched but not shown weighs 2 in the loss (issue #56: head_tail calls
    # 182-215 cells present for 132 true on the real test split)
    "head_tail + hard negatives": {"hard_negative_weight": 1.0},
    "whole_post": {"criteria_formulation": "whole_post"},
    "whole_post + sentence loss": {
        "criteria_formulation": "whole_post",
        "evidence_loss_weight": 1.0,
    },
    # precision first (issue #56): on the real posts the max over a post's sentences at
    # `balanced` called 225 post-symptom cells present for 132 true; sqrt weights rare labels
    # up by less
    "whole_post + sentence loss, sqrt": {
        "criteria_formulation": "whole_post",
        "evidence_loss_weight": 1.0,
        "class_weighting": "sqrt",
    },
    # the real annotations' 427 status-0 sentences (a symptom touched but not shown) as hard
    # negatives: the cells a max over a post's sentences over-calls are where a symptom is talked
    # about without being shown (issue #56)
    "whole_post + sentence loss + hard negatives, sqrt": {
        "criteria_formulation": "whole_post",
        "evidence_loss_weight": 1.0,
        "hard_negative_weight": 1.0,
        "class_weighting": "sqrt",
    },
}
# Decision rules scored on test, each chosen on validation alone: 0.5 (what the loss trains
# for), one cut for every symptom, and per symptom (F1-best, shrunk toward 0.5 by how few
# positives chose it: hpo.train.metrics.shrunk_threshold, finalize's rule)
RULES = ("fixed 0.5", "one cut", "per symptom, shrunk")
EVIDENCE_RECIPE = {  # the evidence task as the real job trained it (CHANGELOG, real data)
    "task": "evidence",
    "epochs": 2,
    "max_length": 128,
    "learning_rate": 5e-5,
    "batch_size": 32,
    "class_weighting": "none",
    "objective_metric": "average_precision",
}
FOLDER = RUNS / NAME


def folder_of(data: str) -> Path:
    """Runs, models and caches of one data set apart from another's: a cut-short bench resumes
    from the runs it finished on the same files only."""
    from hpo.data.redsm5 import files_fingerprint

    return FOLDER / files_fingerprint(data)[:12]


def config_of(arm: str, encoder: str, data: str, max_length: int, seed: int):
    recipe = recipe_config(
        encoder,
        data,
        max_length,
        seed,
        split_seed=0,  # one split for every run
        checkpoint_dir=str(folder_of(data) / "models" / f"{slug(arm)}-{max_length}-s{seed}"),
        cache_dir=str(FOLDER / "cache"),  # keyed by the data's digest already
    )
    reading = {"long_text": "sentences"} if whole(arm) else {}
    return dataclasses.replace(recipe, **reading, **ARMS[arm])


def whole(arm: str) -> bool:
    return ARMS[arm].get("criteria_formulation") == "whole_post"


def slug(arm: str) -> str:
    return arm.replace(" + ", "-").replace(", ", "-").replace(" ", "-")


def one_run(arm: str, seed: int, data: str, max_length: int) -> dict:
    """Train one arm at one seed and score it; runs in its own process."""
    from hpo.train.loop import train

    encoder, _ = encoder_path()
    config = config_of(arm, encoder, data, max_length, seed)
    started = time.perf_counter()
    result = train(config)
    trained = time.perf_counter() - started
    prepared, probs = saved_probabilities(config, [Path(config.checkpoint_dir)])
    validation, test = probs["validation"], probs["test"]
    np.savez_compressed(  # what a later decision rule is scored on, without retraining
        Path(config.checkpoint_dir).with_suffix(".probabilities.npz"),
        validation=validation,
        validation_truth=prepared.validation.tokens.labels,
        test=test,
        test_truth=prepared.test.tokens.labels,
    )
    at_half = scored_at_half(prepared, probs)
    outside, inside = window_recall(prepared.test, test, data, encoder, max_length)
    run = {
        "seed": seed,
        "test_post_macro_f1": at_half["test_post_macro_f1"],
        "test_interval": at_half["test_interval"],
        "validation_post_macro_f1": round(result.metrics["post_macro_f1"], 4),
        "best_epoch": result.best_epoch,
        "recall_outside_window": outside["recall"],
        "outside_window_pairs": outside["pairs"],
        "recall_inside_window": inside["recall"],
        "epoch_seconds": round(result.samples_trained / result.epochs_run
                               / result.train_samples_per_second, 1),
        "run_seconds": round(trained, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "tokens_per_epoch": result.tokens_trained // result.epochs_run,
        "threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
        "commit": commit(),
        **decision_rules(prepared, validation, test),
    }  # fmt: skip
    run |= {
        f"validation_{name}": round(value, 4)
        for name, value in result.metrics.items()
        if name.startswith("evidence_")
    }
    return run


def decision_rules(prepared, validation: np.ndarray, test: np.ndarray) -> dict:
    """Per RULES: its thresholds chosen on validation, and test post macro-F1 with its 95%
    interval and how many post-symptom cells it calls present (against how many are)."""
    from hpo.data import SYMPTOMS
    from hpo.train.evaluate import metrics_at, post_intervals
    from hpo.train.metrics import shrunk_threshold

    truth = prepared.validation.tokens.labels

    def one_cut() -> dict[str, float]:
        cuts = np.round(np.arange(0.05, 0.96, 0.01), 2)
        scores = [
            metrics_at(prepared.validation, validation, dict.fromkeys(SYMPTOMS, c))["post_macro_f1"]
            for c in cuts
        ]
        return dict.fromkeys(SYMPTOMS, float(cuts[int(np.argmax(scores))]))

    thresholds = {
        "fixed 0.5": dict.fromkeys(SYMPTOMS, 0.5),
        "one cut": one_cut(),
        "per symptom, shrunk": {
            s: shrunk_threshold(truth[:, i], validation[:, i])["threshold"]
            for i, s in enumerate(SYMPTOMS)
        },
    }
    found = {"test_true_cells": int(prepared.test.tokens.labels.sum())}
    for rule, cut in thresholds.items():
        low_high = post_intervals(prepared.test, test, cut)["post_macro_f1"]
        key = rule.replace(" ", "_").replace(",", "").replace(".", "")
        found |= {
            f"rule_{key}_test_post_macro_f1": round(
                metrics_at(prepared.test, test, cut)["post_macro_f1"], 4
            ),
            f"rule_{key}_test_interval": [round(low_high["low"], 4), round(low_high["high"], 4)],
            f"rule_{key}_validation_post_macro_f1": round(
                metrics_at(prepared.validation, validation, cut)["post_macro_f1"], 4
            ),
            f"rule_{key}_test_called_cells": int(
                (test >= np.array([cut[s] for s in SYMPTOMS])).sum()
            ),
            f"rule_{key}_thresholds": {s: round(v, 3) for s, v in cut.items()},
        }
    return found


def evidence_run(seed: int, data: str) -> dict:
    """The separate evidence model on the same split: how it ranks validation's sentences."""
    from hpo.train.config import TrainConfig
    from hpo.train.loop import train

    encoder, _ = encoder_path()
    config = TrainConfig(
        encoder=encoder,
        data_dir=data,
        seed=seed,
        split_fractions=SPLIT,
        split_seed=0,
        cache_dir=str(FOLDER / "cache"),
        **EVIDENCE_RECIPE,
    )
    started = time.perf_counter()
    result = train(config)
    return {
        "seed": seed,
        **{
            f"validation_evidence_{name}": round(result.metrics[name], 4)
            for name in ("average_precision", "auroc", "recall_at_1", "recall_at_3")
        },
        "run_seconds": round(time.perf_counter() - started, 1),
        "commit": commit(),
    }


def run_in_process(arm: str, seed: int, data: Path, args) -> dict:
    name = f"{slug(arm)}-{args.max_length}-s{seed}"
    done = folder_of(str(data)) / "runs" / f"{name}.json"
    if done.exists():
        return json.loads(done.read_text())
    done.parent.mkdir(parents=True, exist_ok=True)
    env = child_env(args.threads)
    command = [sys.executable, "-m", "bench.whole_post_runs", "--one", arm, str(seed), str(data),
               str(args.max_length), str(done)]  # fmt: skip
    with done.with_suffix(".log").open("w") as log:
        subprocess.run(command, env=env, cwd=REPO, check=True, stdout=log, stderr=log)
    print(f"[whole_post] {arm} seed {seed}: {done.read_text()}", flush=True)
    return json.loads(done.read_text())


def one_in_process(arm: str, seed: str, data: str, max_length: str, out: str) -> None:
    """The child process's whole job: one run of ``arm`` (or the evidence model), to ``out``."""
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    run = (
        evidence_run(int(seed), data)
        if arm == "evidence model"
        else one_run(arm, int(seed), data, int(max_length))
    )
    Path(out).write_text(json.dumps(run, indent=2))


if __name__ == "__main__":  # the child run_in_process starts; the measure is bench.run's
    if len(sys.argv) != 7 or sys.argv[1] != "--one":
        sys.exit("usage: python -m bench.whole_post_runs --one ARM SEED DATA MAXLEN OUT (one run; "
                 "the measure: python -m bench.run --only whole_post)")  # fmt: skip
    one_in_process(*sys.argv[2:])
