"""Score a prepared split with a model: probabilities per example, then the task's metrics.

Criteria predictions of both formulations become one post x symptom matrix before any
metric is computed, so ``pairs`` and ``multilabel`` are judged by the same code.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support
from torch import nn

from hpo.data import SYMPTOMS
from hpo.data.collate import sorted_batches
from hpo.data.tokenized import TokenizedSplit
from hpo.train.config import TrainConfig
from hpo.train.memory import guard_host_memory
from hpo.train.metrics import (
    BOOTSTRAP_LEVEL,
    bootstrap_interval,
    criteria_metrics,
    evidence_metrics,
    tune_thresholds,
)
from hpo.train.posts import PostScores, evidence_ranking, score_posts
from hpo.train.prepared import PreparedSplit
from hpo.train.step import free_memory, is_out_of_memory
from hpo.vocabulary import TUNED_PREFIX, Metric, Threshold

# Metrics that depend on the decision threshold: each also has a tuned_ twin, at per-symptom
# thresholds.
THRESHOLDED: tuple[Metric, ...] = (
    "macro_f1",
    "f1",
    "precision",
    "recall",
    "accuracy",
    "post_micro_f1",
    "post_macro_f1",
)


# resamples of the posts for each interval: on a split shaped like the real test split
# (148 posts, 3-33 positives per symptom) the bounds of 2,000 move by sd 0.002 between seeds;
# the seed is fixed so that a card can be reproduced
RESAMPLES = 2000
SEED = 0
INTERVAL_METRICS = ("post_macro_f1", "post_micro_f1")  # criteria's post-level F1s
# the metrics a bootstrap over posts gives an interval for, by bootstrap_interval's name:
# the post-level F1s, averaged over the symptoms, and macro_f1 over every cell (or sentence)
BOOTSTRAPPED = {
    "post_macro_f1": "macro_f1",
    "post_micro_f1": "micro_f1",
    "macro_f1": "binary_macro_f1",
}


@dataclass(frozen=True)
class Evaluation:
    metrics: dict[str, float]
    thresholds: dict[
        str, float
    ]  # per symptom: tuned on this split, or the (validation) ones it was given
    # the split's probabilities, for its intervals; two evaluations are equal by their figures
    probs: np.ndarray | None = field(default=None, compare=False, repr=False)


@torch.inference_mode()
def sequence_logits(
    model: nn.Module,
    tokens: TokenizedSplit,
    sequence_ids: np.ndarray,
    collate,
    batch_size: int,
    device,
    autocast=nullcontext,
    max_tokens: int | None = None,
    sentences: bool = False,
) -> np.ndarray:
    """Logits per sequence, (len(sequence_ids), labels) float32, in eval mode and in
    length-sorted batches of ``batch_size`` sequences (and ``max_tokens`` tokens at most, at
    the longest sequence's width): memory is bounded by the batch, not by how many chunks a
    long text has. Out of memory halves the batch. ``sentences``: a whole_post model's outputs
    per sentence, (len(sequence_ids), rows, outputs), row i for the sequence's sentence i."""
    sequence_ids = np.asarray(sequence_ids, dtype=np.int64)
    rows = int(tokens.sentences_per_sequence[sequence_ids].max()) if sentences else 0
    lengths = tokens.sequence_lengths[sequence_ids]
    if max_tokens and len(lengths):
        batch_size = min(batch_size, max(1, max_tokens // int(lengths.max())))
    was_training = model.training
    model.eval()
    try:
        while True:
            try:
                order, outputs = [], []
                for batch in sorted_batches(lengths, batch_size):
                    features = tokens.features(sequence_ids[batch])
                    inputs = {
                        k: v.to(device, non_blocking=True) for k, v in collate(features).items()
                    }
                    with autocast(), guard_host_memory():
                        if sentences:  # every batch to one width: the split's most sentences
                            out = model(**inputs)[:, :rows]
                            out = torch.nn.functional.pad(out, (0, 0, 0, rows - out.shape[1]))
                        else:
                            out = model(**inputs)
                        outputs.append(out.float())
                    order += batch
                break
            except (torch.OutOfMemoryError, RuntimeError) as exc:
                if not is_out_of_memory(exc) or batch_size == 1:
                    raise
                del exc
                free_memory(device)
                batch_size //= 2
        logits = np.empty((len(order), *outputs[0].shape[1:]), dtype=np.float32)
        logits[order] = torch.cat(outputs).cpu().numpy()  # one device→host copy per call
        return logits
    finally:
        model.train(was_training)


def split_probabilities(
    model: nn.Module,
    tokens: TokenizedSplit,
    collate,
    batch_size: int,
    device,
    autocast=nullcontext,
    max_tokens: int | None = None,
) -> np.ndarray:
    """Probabilities per example and label, (n, labels), in the split's order. A long text's
    chunks are max-pooled: a symptom stated in any part of a post is in the post, and a mean
    would dilute the one chunk that states it with every chunk that does not. A whole_post
    model's sentences pool as its head says (``score_posts``)."""
    return probabilities(
        split_scores(model, tokens, collate, batch_size, device, autocast, max_tokens)
    )


def split_scores(
    model: nn.Module,
    tokens: TokenizedSplit,
    collate,
    batch_size: int,
    device,
    autocast=nullcontext,
    max_tokens: int | None = None,
) -> np.ndarray | PostScores:
    """What a model makes of a split: each example's probabilities, and from a whole_post model
    its sentences' scores too (``PostScores``)."""
    if tokens.segments is not None:

        def sentence_outputs(sequence_ids: np.ndarray) -> np.ndarray:
            return sequence_logits(
                model, tokens, sequence_ids, collate, batch_size, device, autocast, max_tokens,
                sentences=True,
            )  # fmt: skip

        return score_posts(model, tokens, sentence_outputs)
    logits = sequence_logits(
        model,
        tokens,
        np.arange(len(tokens.input_ids)),
        collate,
        batch_size,
        device,
        autocast,
        max_tokens,
    )
    pooled = np.maximum.reduceat(logits, tokens.offsets[:-1], axis=0)
    return torch.sigmoid(torch.from_numpy(pooled)).numpy().astype(np.float64)


def probabilities(scores: np.ndarray | PostScores) -> np.ndarray:
    """The per-example probabilities of ``split_scores``'s answer."""
    return scores.probs if isinstance(scores, PostScores) else scores


def averaged(found: list[np.ndarray | PostScores]) -> np.ndarray | PostScores:
    """Several models' scores of one split (an ensemble's members) as their mean; every
    whole_post member reads the split into the same windows and sentences."""
    if not isinstance(found[0], PostScores):
        return np.mean(found, axis=0)
    return replace(
        found[0],
        probs=np.mean([scores.probs for scores in found], axis=0),
        sentence_probs=np.mean([scores.sentence_probs for scores in found], axis=0),
    )


def evaluate(
    model,
    split: PreparedSplit,
    collate,
    config: TrainConfig,
    device,
    autocast=nullcontext,
    thresholds: dict[str, float] | None = None,
) -> Evaluation:
    """Metrics at 0.5, and ``tuned_`` twins at per-symptom thresholds: ``thresholds`` when
    given (validation's, to score test), else tuned on this split."""
    scoring = (
        model,
        split.tokens,
        collate,
        config.eval_batch_size,
        device,
        autocast,
        config.inference_token_budget(torch.device(device).type),
    )
    scores = split_scores(*scoring)
    evaluation = score(split, probabilities(scores), thresholds)
    # a whole_post model's sentences: do they find the evidence?
    return replace(evaluation, metrics=evaluation.metrics | evidence_ranking(split, scores))


def score(
    split: PreparedSplit, probs: np.ndarray, thresholds: dict[str, float] | None = None
) -> Evaluation:
    metrics = _metrics(split, probs, 0.5)
    if thresholds is None:
        thresholds = _tune(split, probs)
    at_tuned = _metrics(split, probs, np.array([thresholds[s] for s in SYMPTOMS]))
    metrics |= {
        TUNED_PREFIX + name: value for name, value in at_tuned.items() if name in THRESHOLDED
    }
    return Evaluation(metrics, thresholds, probs)


def post_intervals(
    split: PreparedSplit,
    probs,
    thresholds: dict[str, float],
    metrics: tuple[str, ...] = INTERVAL_METRICS,
) -> dict[str, dict]:
    """How far each of ``metrics`` could move by which posts the split happened to hold: a
    percentile bootstrap over its posts (an evidence post's sentences drawn together) at
    ``thresholds``. Given for the F1s in BOOTSTRAPPED (post_* for criteria only); the other
    names are left out."""
    cut = np.array([thresholds[s] for s in SYMPTOMS])
    if split.task == "evidence":
        truth, groups = split.tokens.labels, np.array(split.post_ids)
        decided = (probs[:, 0] >= cut[_symptom_columns(split)]).astype(np.int64)
    else:
        (truth, scores), groups = post_matrix(split, probs), None
        decided = (scores >= cut).astype(np.int64)
    found = {}
    for name in dict.fromkeys(metrics):  # each once
        if name not in BOOTSTRAPPED or (split.task == "evidence" and name in INTERVAL_METRICS):
            continue
        low, high = bootstrap_interval(
            truth, decided, BOOTSTRAPPED[name], n=RESAMPLES, seed=SEED, groups=groups
        )
        found[name] = {
            "low": round(low, 6),
            "high": round(high, 6),
            "level": BOOTSTRAP_LEVEL,
            "resamples": RESAMPLES,
            "seed": SEED,
            "posts": len(set(split.post_ids)),
        }
    return found


def per_symptom(
    split: PreparedSplit, probs: np.ndarray, thresholds: dict[str, float]
) -> dict[str, dict]:
    """Per symptom at ``thresholds``: F1, precision, recall, the confusion counts and the
    support (positive posts for criteria, sentences for evidence), for the model card's table.
    A figure whose denominator is zero is None, not a made-up 0: a symptom with no example in
    the split (no test sentence of it, say) has support 0 and no F1."""
    table = {}
    for symptom, (truth, scores) in zip(SYMPTOMS, symptom_cells(split, probs), strict=True):
        if not len(truth):  # nothing to count: scikit-learn refuses an empty array
            table[symptom] = dict.fromkeys(("f1", "precision", "recall")) | _counts(0, 0, 0, 0)
            continue
        decided = (scores >= thresholds[symptom]).astype(np.int64)
        tn, fp, fn, tp = (int(n) for n in confusion_matrix(truth, decided, labels=[0, 1]).ravel())
        precision, recall, f1, _ = precision_recall_fscore_support(
            truth, decided, labels=[1], zero_division=np.nan
        )
        table[symptom] = {
            "f1": _defined(f1[0]),
            "precision": _defined(precision[0]),
            "recall": _defined(recall[0]),
        } | _counts(tp, fp, fn, tn)
    return table


def _counts(tp: int, fp: int, fn: int, tn: int) -> dict[str, int]:
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "support": tp + fn}


def _defined(value: float) -> float | None:
    """None for scikit-learn's NaN (zero_division): JSON and the card show it as missing."""
    return None if np.isnan(value) else float(value)


def symptom_cells(split: PreparedSplit, probs: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per symptom (in SYMPTOMS order) its 0/1 truth and scores: a column of the post matrix
    for criteria, the symptom's sentences for evidence. What a per-symptom threshold decides."""
    if split.task == "evidence":
        columns = _symptom_columns(split)
        return [
            (split.tokens.labels[columns == c], probs[columns == c, 0])
            for c in range(len(SYMPTOMS))
        ]
    truth, scores = post_matrix(split, probs)
    return [(truth[:, c], scores[:, c]) for c in range(len(SYMPTOMS))]


def metrics_at(
    split: PreparedSplit, probs: np.ndarray, thresholds: dict[str, float]
) -> dict[str, float]:
    """The task's metrics with each symptom decided at its own threshold (no tuned_ twins)."""
    return _metrics(split, probs, np.array([thresholds[s] for s in SYMPTOMS]))


def objective_value(metrics: dict[str, float], metric: str, threshold: Threshold) -> float:
    """The number a trial is judged by: with ``threshold: tuned``, the tuned twin (chosen on
    validation and scored there, so optimistic; finalize scores test at those thresholds)."""
    if threshold == "tuned":
        return metrics.get(TUNED_PREFIX + metric, metrics[metric])
    return metrics[metric]


def post_matrix(split: PreparedSplit, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Criteria truth and scores as post x symptom matrices, from either formulation."""
    if split.traits.per_post:
        return split.tokens.labels, probs
    rows = {post: row for row, post in enumerate(dict.fromkeys(split.post_ids))}
    r = np.fromiter((rows[post] for post in split.post_ids), np.int64, len(split))
    c = np.fromiter(
        (SYMPTOMS.index(criterion) for criterion in split.criteria), np.int64, len(split)
    )
    truth = np.zeros((len(rows), len(SYMPTOMS)), dtype=np.int64)
    scores = np.zeros((len(rows), len(SYMPTOMS)))
    truth[r, c], scores[r, c] = split.tokens.labels, probs[:, 0]
    return truth, scores


def _metrics(split: PreparedSplit, probs: np.ndarray, cut: float | np.ndarray) -> dict[str, float]:
    if split.task != "evidence":
        return criteria_metrics(*post_matrix(split, probs), cut)
    columns = _symptom_columns(split)
    per_example = cut if np.isscalar(cut) else np.asarray(cut)[columns]
    groups = np.unique(
        np.array(split.post_ids, dtype=object) + "|" + np.array(split.criteria, dtype=object),
        return_inverse=True,
    )[1]
    return evidence_metrics(split.tokens.labels, probs[:, 0], groups, per_example)


def _tune(split: PreparedSplit, probs: np.ndarray) -> dict[str, float]:
    if split.task != "evidence":
        return dict(
            zip(SYMPTOMS, map(float, tune_thresholds(*post_matrix(split, probs))), strict=True)
        )
    columns = _symptom_columns(split)
    chosen = {}
    for column, symptom in enumerate(SYMPTOMS):
        rows = columns == column
        chosen[symptom] = (
            float(tune_thresholds(split.tokens.labels[rows, None], probs[rows])[0])
            if rows.any()
            else 0.5
        )
    return chosen


def _symptom_columns(split: PreparedSplit) -> np.ndarray:
    return np.fromiter(
        (SYMPTOMS.index(criterion) for criterion in split.criteria), np.int64, len(split)
    )
