"""Classification metrics, per example, per post and per sentence, as plain Python floats.

Criteria predictions of either formulation become one post x symptom matrix, and every
criteria metric is computed from that matrix by the same code. Thresholds are per column
(symptom); ``tune_thresholds`` picks them on validation data only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    f1_score,
    precision_recall_curve,
    precision_recall_fscore_support,
    roc_auc_score,
)

RECALL_AT = (1, 3)  # evidence: share of a (post, criterion)'s evidence sentences among its top k


def binary_metrics(
    labels: Sequence[int] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    threshold: float | np.ndarray = 0.5,
) -> dict[str, float]:
    """Metrics of positive-class probabilities ``scores`` against 0/1 ``labels``;
    ``threshold`` is one number or one per example.

    ``auroc`` and ``average_precision`` are NaN when undefined: one class only in
    ``labels`` (a small validation split) or non-finite scores (a diverged trial), rather
    than a warning or an exception in the middle of a study.
    """
    labels = np.asarray(labels).astype(np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    if labels.shape != scores.shape or labels.ndim != 1:
        raise ValueError(
            f"labels {labels.shape} and scores {scores.shape} must be equal-length 1-D"
        )
    if len(labels) == 0:
        raise ValueError("cannot compute metrics on zero examples")
    predictions = (scores >= threshold).astype(np.int64)
    precision, recall, f1, _ = precision_recall_fscore_support(
        labels, predictions, labels=[0, 1], zero_division=0
    )
    defined = len(np.unique(labels)) == 2 and bool(np.isfinite(scores).all())
    return {
        "macro_f1": float(np.mean(f1)),
        "f1": float(f1[1]),
        "precision": float(precision[1]),
        "recall": float(recall[1]),
        "accuracy": float(accuracy_score(labels, predictions)),
        "auroc": float(roc_auc_score(labels, scores)) if defined else float("nan"),
        "average_precision": float(average_precision_score(labels, scores))
        if defined
        else float("nan"),
    }


def criteria_metrics(
    truth: np.ndarray, scores: np.ndarray, thresholds: float | np.ndarray = 0.5
) -> dict[str, float]:
    """Metrics of a post x symptom probability matrix against the 0/1 ``truth`` matrix.

    The cells give the example-level metrics (one cell is one (post, criterion) pair);
    ``post_micro_f1`` / ``post_macro_f1`` are the post-level multi-label F1 over the nine
    symptoms that the ReDSM5 paper reports (BERT-base 0.51 / 0.36).
    """
    truth = np.asarray(truth).astype(np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    if truth.shape != scores.shape or truth.ndim != 2:
        raise ValueError(
            f"truth {truth.shape} and scores {scores.shape} must be equal post x symptom matrices"
        )
    cut = np.broadcast_to(np.asarray(thresholds, dtype=np.float64), truth.shape)
    predicted = (scores >= cut).astype(np.int64)
    return binary_metrics(truth.ravel(), scores.ravel(), cut.ravel()) | {
        "post_micro_f1": float(f1_score(truth, predicted, average="micro", zero_division=0)),
        "post_macro_f1": float(f1_score(truth, predicted, average="macro", zero_division=0)),
    }


def evidence_metrics(
    labels: np.ndarray, scores: np.ndarray, groups: np.ndarray, thresholds: float | np.ndarray = 0.5
) -> dict[str, float]:
    """Sentence-level metrics plus ``recall_at_k``: per (post, criterion) ``groups`` with
    evidence, the share of its evidence sentences among its k best-scored, averaged."""
    metrics = binary_metrics(labels, scores, thresholds)
    labels, scores, groups = (
        np.asarray(labels),
        np.asarray(scores, dtype=np.float64),
        np.asarray(groups),
    )
    order = np.lexsort((-scores, groups))  # by group, best first
    ranked_groups, ranked_labels = groups[order], labels[order]
    starts = np.flatnonzero(np.r_[True, ranked_groups[1:] != ranked_groups[:-1]])
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    positives = np.add.reduceat(ranked_labels, starts)
    with_evidence = positives > 0
    for k in RECALL_AT:
        found = np.add.reduceat(ranked_labels * (rank < k), starts)
        metrics[f"recall_at_{k}"] = (
            float(np.mean(found[with_evidence] / positives[with_evidence]))
            if with_evidence.any()
            else float("nan")
        )
    return metrics


def tune_thresholds(truth: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per column, the threshold that maximises F1 on these (validation) rows; 0.5 for a
    column without positives. Chosen on validation, applied unchanged to test."""
    truth, scores = np.asarray(truth), np.asarray(scores, dtype=np.float64)
    thresholds = np.full(truth.shape[1], 0.5)
    for column in range(truth.shape[1]):
        if truth[:, column].any() and np.isfinite(scores[:, column]).all():
            precision, recall, cuts = precision_recall_curve(truth[:, column], scores[:, column])
            f1 = 2 * precision[:-1] * recall[:-1] / np.maximum(precision[:-1] + recall[:-1], 1e-12)
            thresholds[column] = float(cuts[int(np.argmax(f1))])
    return thresholds


# A per-symptom threshold chosen on n positives is pulled toward 0.5 with weight
# PRIOR_POSITIVES / (n + PRIOR_POSITIVES): the F1-best cut over a handful of positives is mostly
# noise (one post moves it), over hundreds it is signal. 10 positives' worth of trust in 0.5, the
# cut the loss trains for, leaves a symptom with 300 positives at 97% of its best cut and one
# with 5 at a third of the way there.
PRIOR_POSITIVES = 10
BOOTSTRAP_LEVEL = 0.95


def shrunk_threshold(
    truth: np.ndarray, scores: np.ndarray, prior_positives: float = PRIOR_POSITIVES
) -> dict[str, float | int]:
    """One symptom's threshold from out-of-fold ``scores`` (1-D, any number of rows): the
    F1-best cut (``tune_thresholds``), shrunk toward 0.5 by how few positives chose it.
    Returns the threshold, the unshrunk cut and the positives and rows it was chosen on."""
    truth = np.asarray(truth).astype(np.int64).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    best = float(tune_thresholds(truth[:, None], scores[:, None])[0])
    positives = int(truth.sum())
    weight = positives / (positives + prior_positives)
    return {
        "threshold": 0.5 + weight * (best - 0.5),
        "best_f1_threshold": best,
        "positives": positives,
        "rows": len(truth),
    }


BOOTSTRAP_METRICS = ("macro_f1", "micro_f1", "binary_macro_f1")


def bootstrap_interval(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    metric: str = "macro_f1",
    n: int = 2000,
    seed: int = 0,
    level: float = BOOTSTRAP_LEVEL,
    groups: np.ndarray | None = None,
) -> tuple[float, float]:
    """The percentile bootstrap interval of an F1 over posts: ``y_true`` and ``y_pred`` are
    0/1 matrices, a row per post and a column per symptom (criteria), or a row per sentence
    and ``groups`` each one's post (evidence: a post's sentences are drawn together). The
    posts are resampled with replacement ``n`` times with ``seed``, and ``metric`` computed on
    each resample: "macro_f1" or "micro_f1" over the columns, as sklearn's f1_score averages
    with zero_division=0, or "binary_macro_f1", binary_metrics' macro_f1 over every entry
    (the positive and the negative class's F1, averaged)."""
    y_true = np.asarray(y_true).astype(np.int64)
    y_pred = np.asarray(y_pred).astype(np.int64)
    if y_true.ndim == 1:
        y_true, y_pred = y_true[:, None], y_pred[:, None]
    if y_true.shape != y_pred.shape or y_true.ndim != 2 or not len(y_true):
        raise ValueError(
            f"y_true {y_true.shape} and y_pred {y_pred.shape} must be equal, non-empty "
            "post x symptom matrices"
        )
    if metric not in BOOTSTRAP_METRICS:
        raise ValueError(f"metric must be one of {', '.join(BOOTSTRAP_METRICS)}, got {metric!r}")
    if n < 1 or not 0 < level < 1:
        raise ValueError(f"need n >= 1 resamples and 0 < level < 1, got {n}, {level}")
    post = np.arange(len(y_true)) if groups is None else np.unique(groups, return_inverse=True)[1]
    posts = int(post.max()) + 1
    # per post and symptom, the confusion counts; a resample's are its posts' summed
    counts = np.zeros((4, posts, y_true.shape[1]), dtype=np.int64)
    for k, cell in enumerate(
        (y_true & y_pred, (1 - y_true) & y_pred, y_true & (1 - y_pred), (1 - y_true) & (1 - y_pred))
    ):
        np.add.at(counts[k], post, cell)
    rows = np.random.default_rng(seed).integers(0, posts, size=(n, posts))
    # how often each resample drew each post
    drawn = np.bincount((rows + posts * np.arange(n)[:, None]).ravel(), minlength=n * posts)
    tp, fp, fn, tn = (drawn.reshape(n, posts) @ counts[k] for k in range(4))
    if metric != "macro_f1":  # over every entry
        tp, fp, fn, tn = (x.sum(axis=1) for x in (tp, fp, fn, tn))
    values = _f1(tp, fp, fn)
    if metric == "macro_f1":
        values = values.mean(axis=1)
    elif metric == "binary_macro_f1":
        values = (values + _f1(tn, fn, fp)) / 2  # "absent" is the positive class of the other
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """F1 from confusion counts; 0 where nothing is positive or predicted (zero_division=0)."""
    denominator = 2 * tp + fp + fn
    return np.divide(2 * tp, denominator, out=np.zeros(denominator.shape), where=denominator > 0)
