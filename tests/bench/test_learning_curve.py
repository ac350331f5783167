"""bench/learning_curve.py: what each doubling of the training posts added, read off the seeds'
medians along the whole curve."""

from __future__ import annotations

import pytest

from bench.learning_curve import SHARES, _label, _per_doubling


def _runs(by_share: dict[float, list[tuple[int, float]]]) -> dict:
    return {
        _label(share): [{"train_posts": posts, "test_post_macro_f1": f1} for posts, f1 in seeds]
        for share, seeds in by_share.items()
    }


def test_a_curve_that_gains_the_same_at_each_doubling_gives_that_gain():
    runs = _runs({0.25: [(300, 0.40)], 0.5: [(600, 0.45)], 1.0: [(1200, 0.50)]})
    assert _per_doubling(runs, "test_post_macro_f1") == pytest.approx(0.05)


def test_each_share_counts_once_by_its_seeds_median():
    # an outlying seed at the half moves nothing; the curve's slope is the medians' least squares
    runs = _runs(
        {
            0.25: [(300, 0.40), (300, 0.40), (300, 0.41)],
            0.5: [(600, 0.40), (600, 0.10), (600, 0.40)],
            1.0: [(1200, 0.40), (1200, 0.40), (1200, 0.39)],
        }
    )
    assert _per_doubling(runs, "test_post_macro_f1") == pytest.approx(0.0)


def test_the_curve_ends_at_the_whole_training_set():
    assert SHARES[-1] == 1.0 and list(SHARES) == sorted(SHARES)
