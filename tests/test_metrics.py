import math
import warnings

import numpy as np
import pytest

from hpo.train.metrics import binary_metrics, post_level_metrics

LABELS = [1, 1, 1, 0, 0, 0]
SCORES = [0.9, 0.6, 0.4, 0.7, 0.8, 0.1]  # at 0.5: TP 2, FP 2, FN 1, TN 1


def test_binary_metrics_match_hand_computed_values():
    metrics = binary_metrics(LABELS, SCORES)

    # Positive class: precision 2/4, recall 2/3, F1 = 2·(1/2)(2/3)/(1/2 + 2/3) = 4/7.
    # Negative class: precision 1/2, recall 1/3, F1 = 2/5. Macro = (4/7 + 2/5) / 2 = 17/35.
    # AUROC: positive-over-negative pairs 3 + 1 + 1 of 9.
    expected = {
        "precision": 1 / 2,
        "recall": 2 / 3,
        "f1": 4 / 7,
        "macro_f1": 17 / 35,
        "accuracy": 3 / 6,
        "auroc": 5 / 9,
    }
    assert metrics == pytest.approx(expected)
    assert all(type(value) is float for value in metrics.values())


def test_threshold_moves_the_decision():
    metrics = binary_metrics(np.array(LABELS), np.array(SCORES), threshold=0.65)
    # Predictions 1 0 0 1 1 0: TP 1, FP 2, FN 2.
    assert metrics["precision"] == pytest.approx(1 / 3)
    assert metrics["recall"] == pytest.approx(1 / 3)
    assert metrics["auroc"] == pytest.approx(5 / 9)  # threshold-free


def test_single_class_gives_nan_auroc_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = binary_metrics([0, 0, 0], [0.1, 0.2, 0.3])
    assert math.isnan(metrics["auroc"])
    assert metrics["accuracy"] == 1.0
    assert metrics["f1"] == 0.0  # no positives anywhere: zero_division, not a warning
    assert metrics["macro_f1"] == 0.5


def test_non_finite_scores_give_nan_auroc():
    metrics = binary_metrics([0, 1], [float("nan"), 0.9])
    assert math.isnan(metrics["auroc"])
    assert metrics["recall"] == 1.0


def test_binary_metrics_reject_mismatched_inputs():
    with pytest.raises(ValueError, match="equal-length"):
        binary_metrics([0, 1], [0.5])
    with pytest.raises(ValueError, match="zero examples"):
        binary_metrics([], [])


def test_post_level_metrics_match_a_hand_computed_matrix():
    symptoms = ["A", "B", "C"]
    rows = [  # post, criterion, label, prediction
        ("p1", "A", 1, 1),
        ("p1", "A", 0, 0),  # a second sentence: the post keeps A
        ("p1", "B", 1, 0),
        ("p1", "C", 0, 0),
        ("p2", "A", 0, 1),
        ("p2", "C", 1, 1),  # no B example for p2: absent
        ("p2", "SPECIAL_CASE", 1, 1),  # outside the symptoms: ignored
    ]
    post_ids, criteria, labels, predictions = zip(*rows, strict=True)
    metrics = post_level_metrics(post_ids, criteria, labels, predictions, symptoms)

    # Truth p1 [1 1 0], p2 [0 0 1]; predicted p1 [1 0 0], p2 [1 0 1].
    # Micro: TP 2, FP 1, FN 1 → 4/6. Macro: A 2/3, B 0, C 1 → 5/9.
    assert metrics == pytest.approx({"post_micro_f1": 2 / 3, "post_macro_f1": 5 / 9})
    assert all(type(value) is float for value in metrics.values())


def test_post_level_metrics_reject_mismatched_lengths():
    with pytest.raises(ValueError, match="equal length"):
        post_level_metrics(["p1"], ["A"], [1, 0], [1], ["A"])
