import math
import warnings

import numpy as np
import pytest
from sklearn.metrics import f1_score

from hpo.train.metrics import (
    binary_metrics,
    bootstrap_interval,
    criteria_metrics,
    evidence_metrics,
    shrunk_threshold,
    tune_thresholds,
)

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
        # positives ranked 1st, 4th and 5th: precision 1, 2/4, 3/5 there
        "average_precision": (1 + 2 / 4 + 3 / 5) / 3,
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


def test_criteria_metrics_match_a_hand_computed_matrix():
    # Truth p1 [1 1 0], p2 [0 0 1]; at 0.5 predicted p1 [1 0 0], p2 [1 0 1].
    truth = np.array([[1, 1, 0], [0, 0, 1]])
    scores = np.array([[0.9, 0.2, 0.1], [0.7, 0.4, 0.6]])
    metrics = criteria_metrics(truth, scores)
    # Micro: TP 2, FP 1, FN 1 → 4/6. Macro: A 2/3, B 0, C 1 → 5/9.
    assert metrics["post_micro_f1"] == pytest.approx(2 / 3)
    assert metrics["post_macro_f1"] == pytest.approx(5 / 9)
    # The cells are the (post, criterion) examples: TP 2, FP 1, FN 1, TN 2.
    assert metrics["f1"] == pytest.approx(2 / 3) and metrics["accuracy"] == pytest.approx(4 / 6)
    assert all(type(value) is float for value in metrics.values())


def test_per_symptom_thresholds_apply_per_column():
    truth = np.array([[1, 1, 0], [0, 0, 1]])
    scores = np.array([[0.9, 0.2, 0.1], [0.7, 0.4, 0.6]])
    # B at 0.15 finds p1's B (and p2's, wrongly); A at 0.8 drops p2's false A.
    metrics = criteria_metrics(truth, scores, np.array([0.8, 0.15, 0.5]))
    assert metrics["post_micro_f1"] == pytest.approx(2 * 3 / (2 * 3 + 1))  # TP 3, FP 1, FN 0
    assert metrics["post_macro_f1"] == pytest.approx((1 + 2 / 3 + 1) / 3)


def test_tuned_thresholds_maximise_validation_f1_per_column():
    truth = np.array([[1, 0], [1, 0], [0, 1], [0, 0]])
    scores = np.array([[0.30, 0.9], [0.35, 0.2], [0.20, 0.6], [0.10, 0.7]])
    thresholds = tune_thresholds(truth, scores)
    assert thresholds[0] == pytest.approx(0.30)  # both positives, no negative: F1 1.0
    assert criteria_metrics(truth[:, :1], scores[:, :1], thresholds[:1])["post_macro_f1"] == 1.0
    # no positives: kept at 0.5
    assert tune_thresholds(np.zeros((3, 1)), np.full((3, 1), 0.9))[0] == 0.5


def test_criteria_metrics_reject_mismatched_shapes():
    with pytest.raises(ValueError, match="equal post x symptom"):
        criteria_metrics(np.zeros((2, 3)), np.zeros((2, 2)))


def test_evidence_recall_at_k_per_post_and_criterion():
    # group 0 has 2 evidence sentences ranked 1st and 3rd; group 1 has one ranked 2nd; group 2 has
    # none.
    labels = np.array([1, 0, 1, 0, 1, 0, 0])
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    groups = np.array([0, 0, 0, 1, 1, 2, 2])
    metrics = evidence_metrics(labels, scores, groups)
    assert metrics["recall_at_1"] == pytest.approx((1 / 2 + 0) / 2)
    assert metrics["recall_at_3"] == pytest.approx((2 / 2 + 1) / 2)
    assert 0 < metrics["average_precision"] <= 1


# ---- bootstrap intervals and out-of-fold thresholds -------------------------------------------


def _posts(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n posts x 9 symptoms, ~20% positive, predicted right about 80% of the time."""
    rng = np.random.default_rng(seed)
    truth = (rng.random((n, 9)) < 0.2).astype(int)
    wrong = rng.random((n, 9)) < 0.2
    return truth, np.where(wrong, 1 - truth, truth)


@pytest.mark.parametrize("metric", ["macro_f1", "micro_f1"])
def test_bootstrap_interval_is_the_percentiles_of_sklearn_f1_over_resampled_posts(metric):
    truth, predicted = _posts(60)
    low, high = bootstrap_interval(truth, predicted, metric, n=300, seed=7)
    # the known case, by hand: the same resamples through sklearn's f1_score
    rows = np.random.default_rng(7).integers(0, 60, size=(300, 60))
    average = metric.removesuffix("_f1")
    values = [f1_score(truth[r], predicted[r], average=average, zero_division=0) for r in rows]
    assert (low, high) == pytest.approx(tuple(np.percentile(values, [2.5, 97.5])), abs=1e-12)
    point = f1_score(truth, predicted, average=average, zero_division=0)
    assert low < point < high


def test_bootstrap_interval_of_the_cells_macro_f1_resamples_posts_with_all_their_cells():
    # a study's macro_f1 (binary_metrics': both classes' F1 over every post x symptom cell)
    truth, predicted = _posts(60)
    low, high = bootstrap_interval(truth, predicted, "binary_macro_f1", n=300, seed=7)
    rows = np.random.default_rng(7).integers(0, 60, size=(300, 60))
    values = [
        binary_metrics(truth[r].ravel(), predicted[r].ravel().astype(float))["macro_f1"]
        for r in rows
    ]
    assert (low, high) == pytest.approx(tuple(np.percentile(values, [2.5, 97.5])), abs=1e-12)
    point = binary_metrics(truth.ravel(), predicted.ravel().astype(float))["macro_f1"]
    assert low < point < high


def test_bootstrap_interval_with_groups_draws_a_posts_sentences_together():
    # evidence: a row per sentence, and a post's sentences stand or fall together
    rng = np.random.default_rng(2)
    sentences = rng.integers(1, 8, size=40)  # per post
    groups = np.repeat([f"p{i:02d}" for i in range(40)], sentences)
    truth = (rng.random(len(groups)) < 0.3).astype(int)
    predicted = np.where(rng.random(len(groups)) < 0.25, 1 - truth, truth)
    low, high = bootstrap_interval(
        truth, predicted, "binary_macro_f1", n=300, seed=5, groups=groups
    )
    posts = np.random.default_rng(5).integers(0, 40, size=(300, 40))
    values = []
    for drawn in posts:
        rows = np.concatenate([np.flatnonzero(groups == f"p{i:02d}") for i in drawn])
        values.append(binary_metrics(truth[rows], predicted[rows].astype(float))["macro_f1"])
    assert (low, high) == pytest.approx(tuple(np.percentile(values, [2.5, 97.5])), abs=1e-12)


def test_bootstrap_interval_is_deterministic_for_a_seed_and_narrows_with_more_posts():
    truth, predicted = _posts(100)
    assert bootstrap_interval(truth, predicted, seed=3) == bootstrap_interval(
        truth, predicted, seed=3
    )
    assert bootstrap_interval(truth, predicted, seed=3) != bootstrap_interval(
        truth, predicted, seed=4
    )
    widths = []
    for n in (50, 200, 800):
        low, high = bootstrap_interval(*_posts(n, seed=1), "micro_f1", n=1000)
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2], widths
    # a perfect prediction has nowhere to move
    assert bootstrap_interval(truth, truth) == (1.0, 1.0)


def test_bootstrap_interval_refuses_what_it_cannot_resample():
    truth, predicted = _posts(10)
    with pytest.raises(ValueError, match="equal, non-empty"):
        bootstrap_interval(truth, predicted[:, :3])
    with pytest.raises(ValueError, match="one of macro_f1, micro_f1, binary_macro_f1"):
        bootstrap_interval(truth, predicted, "accuracy")


def test_a_threshold_chosen_on_few_positives_stays_near_half_and_on_many_near_its_best_cut():
    rng = np.random.default_rng(0)

    def scored(positives: int) -> tuple[np.ndarray, np.ndarray]:
        # positives score around 0.3, negatives around 0.1: the F1-best cut is far below 0.5
        truth = np.r_[np.ones(positives), np.zeros(10 * positives)].astype(int)
        scores = np.clip(np.where(truth == 1, 0.3, 0.1) + rng.normal(0, 0.05, len(truth)), 0, 1)
        return truth, scores

    few, many = shrunk_threshold(*scored(3)), shrunk_threshold(*scored(300))
    assert few["positives"] == 3 and many["positives"] == 300 and many["rows"] == 3300
    for chosen in (few, many):
        best, weight = chosen["best_f1_threshold"], chosen["positives"] / (chosen["positives"] + 10)
        assert best < 0.35
        assert chosen["threshold"] == pytest.approx(0.5 + weight * (best - 0.5))
    assert abs(few["threshold"] - 0.5) < 0.1 < abs(many["threshold"] - 0.5)
    # no positives: nothing to choose on, 0.5
    assert shrunk_threshold(np.zeros(5), np.linspace(0, 1, 5))["threshold"] == 0.5
