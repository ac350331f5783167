"""bench/portfolio_moves.py measures the portfolio the product runs, in its order, and calls a
move's gain over the recipe from the same test posts resampled for both sides."""

from __future__ import annotations

import numpy as np

from bench.portfolio_moves import paired_gain, points, study_spec
from bench.workload import RECIPE
from hpo.study.search import portfolio_points


def test_the_bench_trains_the_recipe_then_the_products_portfolio_one_setting_moved_each():
    found = points()
    assert found[0] == ("recipe", RECIPE)
    # the product's order: training longer first (the epochs 3-5: 4 x 1.5 clipped to 5)
    assert found[1] == ("epochs 4 -> 5", {**RECIPE, "epochs": 5})
    for label, point in found[1:]:
        moved = [name for name in RECIPE if point[name] != RECIPE[name]]
        assert len(moved) == 1 and label.startswith(moved[0]), label
    assert [label for label, _ in found[1:]] == [
        label for label, _ in portfolio_points(study_spec())
    ]


def test_a_gain_is_paired_over_the_same_resampled_posts():
    rng = np.random.default_rng(1)
    truth = (rng.random((60, 9)) < 0.3).astype(np.int64)
    noisy = np.where(rng.random(truth.shape) < 0.3, 1 - truth, truth)
    same = paired_gain(truth, [noisy, noisy], [noisy, noisy], resamples=100)
    assert same == {"gain": 0.0, "interval": [0.0, 0.0]}
    # the move gets every post right: better on every resample of the posts
    better = paired_gain(truth, [truth, truth], [noisy, noisy], resamples=100)
    assert better["gain"] > 0 and 0 < better["interval"][0] <= better["gain"]
    assert better["interval"][0] <= better["interval"][1]
    # and the other way round is the mirror image
    worse = paired_gain(truth, [noisy, noisy], [truth, truth], resamples=100)
    assert worse["gain"] == -better["gain"] and worse["interval"][1] < 0
