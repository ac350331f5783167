"""Classification metrics, per example and per post, as plain Python floats."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    precision_recall_fscore_support,
    roc_auc_score,
)


def binary_metrics(
    labels: Sequence[int] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    threshold: float = 0.5,
) -> dict[str, float]:
    """Metrics of positive-class probabilities ``scores`` against 0/1 ``labels``.

    ``auroc`` is NaN when it is undefined: one class only in ``labels`` (a small
    validation split) or non-finite scores (a diverged trial), rather than a warning or
    an exception in the middle of a study.
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
    }


def post_level_metrics(
    post_ids: Sequence[object],
    criteria: Sequence[str],
    labels: Sequence[int] | np.ndarray,
    predictions: Sequence[int] | np.ndarray,
    symptoms: Sequence[str],
) -> dict[str, float]:
    """Micro and macro F1 over a post × symptom matrix, as the ReDSM5 paper reports them.

    A post holds a symptom when any of its examples for that criterion is positive, so
    sentence-level examples aggregate to the post. A (post, symptom) cell with no
    example counts as absent; criteria outside ``symptoms`` (SPECIAL_CASE) are ignored.
    """
    n = len(post_ids)
    if not len(criteria) == len(labels) == len(predictions) == n:
        raise ValueError("post_ids, criteria, labels and predictions must have equal length")
    rows = {post: row for row, post in enumerate(dict.fromkeys(post_ids))}
    columns = {symptom: column for column, symptom in enumerate(symptoms)}
    truth = np.zeros((len(rows), len(columns)), dtype=np.int64)
    predicted = np.zeros_like(truth)
    for post, criterion, label, prediction in zip(
        post_ids, criteria, labels, predictions, strict=True
    ):
        column = columns.get(criterion)
        if column is None:
            continue
        row = rows[post]
        truth[row, column] = max(truth[row, column], int(label))
        predicted[row, column] = max(predicted[row, column], int(prediction))
    return {
        "post_micro_f1": float(f1_score(truth, predicted, average="micro", zero_division=0)),
        "post_macro_f1": float(f1_score(truth, predicted, average="macro", zero_division=0)),
    }
