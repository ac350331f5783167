"""Probabilities and thresholds as the report writes them: never rounded onto the other side of
the threshold they were decided at."""

from __future__ import annotations

import numpy as np
import pytest

from hpo.explain.figures import probability_text, threshold_text


@pytest.mark.parametrize(
    ("threshold", "text"),
    [
        (0.5, "0.50"),
        (0.35, "0.35"),
        (0.845, "0.845"),
        (0.5375269651412964, "0.537527"),
        (1, "1.00"),
    ],
)
def test_a_threshold_shows_two_to_six_decimals_as_many_as_it_has(threshold, text):
    assert threshold_text(threshold) == text


def _side(value: float, threshold: float) -> int:
    return (value > threshold) - (value < threshold)


def test_a_probability_reads_on_the_side_of_the_threshold_it_was_decided_on():
    rng = np.random.default_rng(0)
    thresholds = [0.5, 0.62, 0.35, float(np.float32(0.5375269651412964))]
    for threshold in thresholds:
        shown = float(threshold_text(threshold))
        near = threshold + rng.uniform(-0.01, 0.01, 500)
        for probability in [*near, *rng.uniform(0, 1, 200), threshold]:
            text = probability_text(float(probability), threshold)
            assert len(text.split(".")[1]) >= 2
            assert _side(float(text), shown) == _side(float(probability), threshold), (
                probability,
                threshold,
                text,
            )


def test_a_probability_far_from_its_threshold_keeps_two_decimals():
    assert probability_text(0.9, 0.62) == "0.90"
    assert probability_text(0.05, 0.5) == "0.05"
    assert probability_text(0.497, 0.5) == "0.497" and probability_text(0.504, 0.5) == "0.504"
    assert probability_text(0.5, 0.5) == "0.50"  # on the threshold reads on it
    assert probability_text(0.12345, 0.5, digits=3) == "0.123"
