"""bench/threshold_rules.py compares finalize --cv's threshold rules on the same models: the
mapping that carries out-of-fold thresholds onto the seeds' scale, and the paired reading."""

from __future__ import annotations

import numpy as np
import pytest

from bench.threshold_rules import RULES, compare, mapped_thresholds
from hpo.data import SYMPTOMS


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_a_threshold_follows_the_scale_the_seeds_score_the_same_posts_on():
    rng = np.random.default_rng(0)
    fold = _sigmoid(rng.normal(size=(80, len(SYMPTOMS))))
    # the seeds: surer of themselves (slope 2) and shifted (intercept -1) on the same posts
    seeds = _sigmoid(-1 + 2 * np.log(fold / (1 - fold)))
    fold[:, 0] = 0.3  # a symptom the folds never told apart keeps its threshold
    chosen = dict.fromkeys(SYMPTOMS, 0.4)
    mapped = mapped_thresholds(chosen, fold, seeds)
    assert mapped[SYMPTOMS[0]] == 0.4
    for symptom in SYMPTOMS[1:]:
        assert mapped[symptom] == pytest.approx(_sigmoid(-1 + 2 * np.log(0.4 / 0.6)), abs=1e-6)
    # a post above the threshold on the folds' scale stays above it on the seeds'
    assert (seeds[:, 1] >= mapped[SYMPTOMS[1]]).tolist() == (fold[:, 1] >= 0.4).tolist()


def test_a_rule_reads_better_or_worse_only_where_its_paired_interval_excludes_zero():
    runs = [
        {rule: 0.5 for rule in RULES} | {"folds": 0.6 + 0.01 * r, "validation": 0.5 + d}
        for r, d in enumerate([0.03, -0.03, 0.02, -0.02, 0.0])
    ]
    found = compare(runs)
    assert found["folds_minus_out_of_fold"]["reads"] == "better"
    assert found["validation_minus_out_of_fold"]["reads"] == "no difference shown"
    assert found["fixed_minus_out_of_fold"] == {
        "mean": 0.0,
        "interval": [0.0, 0.0],
        "reads": "no difference shown",
    }
    assert "out_of_fold_minus_out_of_fold" not in found
