"""Criteria formulations on real-shaped posts: encoder tokens and wall time per training
epoch, (criterion, post) pairs against one multilabel pass per post, same encoder and data.

    python -m bench.run --only formulations
"""

from __future__ import annotations

import time

from bench.common import repeated
from bench.workload import described, encoder_path, sample_data
from hpo.train.config import TrainConfig
from hpo.train.loop import train

NAME = "formulations"
DEFINITION = (
    "encoder tokens per training epoch, (criterion, post) pairs / multilabel, max_length 128"
)
POSTS = 300
TARGET = {"at_least": 5}

# (formulation, long_text): today's pairs, the multilabel pass, and multilabel reading every token.
VARIANTS = (("pairs", "truncate"), ("multilabel", "truncate"), ("multilabel", "chunks"))


def measure(args) -> None:
    encoder, encoder_name = encoder_path()
    data = sample_data(f"data-{NAME}", POSTS, args.data_dir)
    load = described(encoder_name, f"{POSTS} generated realistic posts")
    repeated(NAME, lambda: formulations(encoder, data), args.runs, load, DEFINITION, TARGET)


def formulations(encoder: str, data_dir: str, max_length: int = 128) -> dict:
    rows = {}
    for formulation, long_text in VARIANTS:
        config = TrainConfig(
            task="criteria",
            encoder=encoder,
            data_dir=data_dir,
            criteria_formulation=formulation,
            long_text=long_text,
            max_length=max_length,
            epochs=1,
            batch_size=16,
            learning_rate=5e-5,
            class_weighting="balanced",
            split_fractions=(0.8, 0.1, 0.1),
            objective_metric="post_macro_f1",
        )
        started = time.perf_counter()
        result = train(config)
        rows[f"{formulation}/{long_text}"] = {
            "train_tokens_per_epoch": result.tokens_trained,
            "examples_per_epoch": result.samples_trained,
            "epoch_seconds": result.samples_trained / result.train_samples_per_second,
            "run_seconds": time.perf_counter() - started,
            "token_coverage": result.token_coverage["train"],
            "post_macro_f1": result.metrics["post_macro_f1"],
            "post_micro_f1": result.metrics["post_micro_f1"],
        }
    pairs, multilabel = rows["pairs/truncate"], rows["multilabel/truncate"]
    return {
        "ratio": pairs["train_tokens_per_epoch"] / multilabel["train_tokens_per_epoch"],
        "time_ratio": pairs["epoch_seconds"] / multilabel["epoch_seconds"],
        "max_length": max_length,
        "variants": rows,
        "command": "python -m bench.run --only formulations",
    }
