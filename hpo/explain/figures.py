"""Probabilities and thresholds as the report writes them: never rounded onto the other side
of the threshold they were decided at (0.497 and 0.504 both read "0.50" at 0.50)."""

from __future__ import annotations

MOST_DIGITS = 9  # past float32's precision: a probability this close is shown as it is
# a threshold tuned on validation is a float32 probability (0.5375269651412964): six decimals
# tell it from any probability a reader will compare with it
THRESHOLD_DIGITS = 6


def threshold_text(threshold: float) -> str:
    """The threshold with two decimals at least and six at most, no more than it has: 0.50,
    0.845, 0.537527."""
    for digits in range(2, THRESHOLD_DIGITS + 1):
        if float(text := f"{threshold:.{digits}f}") == threshold:
            return text
    return text


def probability_text(probability: float, threshold: float, digits: int = 2) -> str:
    """``probability`` with ``digits`` decimals, or as many more as it takes to read on its
    own side of ``threshold_text(threshold)``: above, below, or on it only where it is on it
    (0.497 at 0.50 reads 0.497 and 0.504 reads 0.504, where both would read 0.50)."""
    side = _side(probability, threshold)
    shown_threshold = float(threshold_text(threshold))
    for shown in range(digits, MOST_DIGITS + 1):
        text = f"{probability:.{shown}f}"
        if _side(float(text), shown_threshold) == side:
            return text
    return text


def _side(value: float, threshold: float) -> int:
    return (value > threshold) - (value < threshold)
