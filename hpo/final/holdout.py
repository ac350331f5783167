"""The held-out test split, scored once for a saved model. Only ``hpo finalize`` calls this:
no trial of a search ever sees the test split."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from hpo.data import SYMPTOMS
from hpo.data.collate import Collator
from hpo.errors import UsageError
from hpo.models.classifier import load_classifier_on
from hpo.models.classifier_file import read_inference
from hpo.models.device import forward_keys
from hpo.models.ensemble_file import is_ensemble, read_ensemble
from hpo.models.hardware import resolve_device
from hpo.train.config import TrainConfig
from hpo.train.evaluate import (
    INTERVAL_METRICS,
    Evaluation,
    averaged,
    metrics_at,
    per_symptom,
    post_intervals,
    probabilities,
    score,
    split_scores,
    symptom_cells,
)
from hpo.train.posts import PostScores, evidence_ranking
from hpo.train.prepare import PreparedData, PreparedSplit, prepare_data


@dataclass(frozen=True)
class TestScore:
    metrics: dict[str, float]  # at the model's decision thresholds
    per_symptom: dict[str, dict]  # at the model's decision thresholds, with each one's support
    thresholds: dict[str, float]  # the decision thresholds, chosen before test was read
    split_sizes: dict[str, dict[str, int]]  # per split: posts and examples
    # the study's metric and (criteria) the post-level F1s, where an F1: the 95% percentile
    # bootstrap interval over test posts
    intervals: dict[str, dict]


def score_on_test(config: TrainConfig, model_dir: str | Path) -> TestScore:
    """``model_dir`` (a ``save_classifier`` folder, or an ensemble of them) on the test split
    of ``config``'s data, through the same meta-safe load and transfer as training."""
    data = prepare_data(config)
    if data.test is None:
        raise UsageError(
            "the split gives the test split no posts; "
            "set train.split_fractions so its third share is > 0"
        )
    folders, inference = (
        read_ensemble(model_dir)
        if is_ensemble(model_dir)
        else ([model_dir], read_inference(model_dir))
    )
    scores = mean_scores(config, data, data.test, folders)
    probs = probabilities(scores)
    decision = dict(inference.thresholds)
    sizes = {
        name: {"posts": len(set(split.post_ids)), "examples": len(split)}
        for name in ("train", "validation", "test")
        if (split := getattr(data, name)) is not None
    }
    return TestScore(
        # and a whole_post model's ranking of test's evidence sentences
        metrics_at(data.test, probs, decision) | evidence_ranking(data.test, scores),
        per_symptom(data.test, probs, decision),
        decision,
        sizes,
        # the study's own metric first: the figure the model was chosen by
        post_intervals(data.test, probs, decision, (config.objective_metric, *INTERVAL_METRICS)),
    )


def compare_on_validation(
    config: TrainConfig, model_dirs: list[Path], candidates: dict[str, dict[str, float] | None]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The average of ``model_dirs``' probabilities on validation, scored at each candidate
    set of thresholds (None: tuned on validation itself); returns the validation-tuned
    thresholds and each candidate's metrics."""
    data = prepare_data(config)
    scores = mean_scores(config, data, data.validation, model_dirs)
    probs = probabilities(scores)
    # a whole_post model's sentences' evidence ranking, which no threshold changes
    ranking = evidence_ranking(data.validation, scores)
    tuned = score(data.validation, probs).thresholds
    return tuned, {
        name: metrics_at(data.validation, probs, tuned if thresholds is None else thresholds)
        | ranking
        for name, thresholds in candidates.items()
    }


def heldout_cells(config: TrainConfig, model_dir: Path) -> dict:
    """A --cv fold's model on the fold it was validated on (``config.cv_fold``'s held-out
    posts, its validation split): per symptom the truth and out-of-fold probabilities, and
    the posts, so the folds together give every train + validation post one probability."""
    data = prepare_data(config)
    return split_cells(
        data.validation, mean_probabilities(config, data, data.validation, [model_dir])
    )


def split_cells(split: PreparedSplit, probs: np.ndarray) -> dict:
    """``probs`` on ``split`` as ``heldout_cells`` keeps them: its posts and, per symptom, the
    truth and scores."""
    return {
        "posts": sorted(set(split.post_ids)),
        "cells": {
            symptom: {"truth": truth.astype(int).tolist(), "scores": scores.round(7).tolist()}
            for symptom, (truth, scores) in zip(SYMPTOMS, symptom_cells(split, probs), strict=True)
        },
    }


def score_on_validation(config: TrainConfig, model_dirs: list[Path]) -> Evaluation:
    """The average of ``model_dirs``' probabilities (seeds of ``config``) scored on the
    validation split, with thresholds tuned there, as a trial's model is."""
    data = prepare_data(config)
    return score(data.validation, mean_probabilities(config, data, data.validation, model_dirs))


def mean_probabilities(
    config: TrainConfig, data: PreparedData, split: PreparedSplit, folders: list
) -> np.ndarray:
    """The mean of saved classifiers' probabilities on ``split``, loaded one at a time. Each
    must read text as ``config`` tokenized ``split``: finalize's ensembles are seeds of one
    configuration."""
    return probabilities(mean_scores(config, data, split, folders))


def mean_scores(
    config: TrainConfig, data: PreparedData, split: PreparedSplit, folders: list
) -> np.ndarray | PostScores:
    """``mean_probabilities``, and for whole_post models their sentences' scores averaged too
    (every member reads the split's posts into the same windows and sentences)."""
    device = resolve_device(config.device)
    found = []
    for folder in folders:
        inference = read_inference(folder)
        if (inference.max_length, inference.long_text) != (config.max_length, config.long_text):
            raise UsageError(
                f"{folder} reads text with max_length {inference.max_length} and long_text "
                f"{inference.long_text}, not as this configuration; score it with hpo predict"
            )
        model, _ = load_classifier_on(folder, device)
        collate = Collator(data.tokenizer.pad_token_id, keep_keys=forward_keys(model))
        with torch.inference_mode():
            found.append(
                split_scores(
                    model,
                    split.tokens,
                    collate,
                    config.eval_batch_size,
                    device,
                    max_tokens=config.inference_token_budget(device.type),
                )
            )
        del model  # one member in memory at a time
    return averaged(found)
