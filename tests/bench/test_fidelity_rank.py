"""bench/fidelity_rank.py's replay on hand-made values: a fidelity that ranks as full training
does keeps the best configuration in every order, a reversed one loses it; the budget replay
charges what the runs cost; the drawn configurations stay inside the spec's space."""

from __future__ import annotations

import numpy as np

from bench import fidelity_rank
from bench import fidelity_replay as replay

FULL = np.linspace(0.30, 0.60, 12)  # configuration i ends at FULL[i]; the last is the best
COST = np.full(12, 10.0)


def test_a_perfectly_ranked_fidelity_keeps_the_best_in_every_order():
    runs = replay.orders(12, 200)
    low = FULL / 2  # another scale, the same ranking
    assert replay.spearman(low, FULL) == 1.0
    assert replay.spearman_interval(low, FULL, count=200) == [1.0, 1.0]
    for eta in (3, 4):
        found = replay.promotion_replay(low, FULL, COST / 4, COST, eta, runs)
        assert found["best_promoted_share"] == 1.0
        # a quarter of a full run each, and under half of them promoted: more than 1 judged
        assert found["judged_per_full_trial"] > 1.2


def test_a_reversed_fidelity_promotes_the_best_only_where_it_comes_first():
    runs = replay.orders(12, 200)
    low = -FULL
    assert replay.spearman(low, FULL) == -1.0
    found = replay.promotion_replay(low, FULL, COST / 4, COST, 3, runs)
    # the best is the worst at the low fidelity: in the top third of what was seen only alone
    assert found["best_promoted_share"] == np.mean(runs[:, 0] == 11) < 0.2


def test_asha_promotes_the_top_third_of_what_it_has_seen():
    order = [0, 1, 2, 3, 4, 5]
    low = [0.1, 0.2, 0.9, 0.3, 0.05, 0.8]
    # the top ceil(seen / eta): 0.3 second of four (<= 2 at eta 3), 0.8 second of six
    assert replay.promoted(order, low, 3).tolist() == [True, True, True, True, False, True]
    assert replay.promoted(order, low, 4).tolist() == [True, True, True, False, False, True]


def test_the_budget_replay_charges_screening_and_full_runs():
    low_cost, full_cost = np.full(12, 2.0), COST
    order = list(range(11, -1, -1))  # the best first
    # (b) with the budget of one full run: the first configuration only
    assert replay.random_full_best(FULL, full_cost, order, 10.0) == FULL[11]
    # (c): the best screened first and promoted, but screening + its full run exceed 10
    assert replay.screened_best(FULL, FULL, low_cost, full_cost, order, 10.0, 3) is None
    # the first look goes on from its own first epoch: a promotion costs the full run only;
    # ascending, each is the best seen and promoted: 10, 20, 30, 40 spent, then out of budget
    ascending = list(range(12))
    cheap = replay.screened_best(FULL, FULL, low_cost, full_cost, ascending, 40.0, 3, True)
    assert cheap == FULL[3]
    found = replay.budget_replay(FULL, FULL, low_cost, full_cost, (4, 8), 3, replay.orders(12))
    assert set(found) == {"4", "8"}
    assert found["8"]["screened_mean_best"] >= found["4"]["screened_mean_best"]
    assert 0 <= found["4"]["screened_at_least_random_share"] <= 1


def test_a_constant_fidelity_has_no_ranking():
    assert replay.spearman(np.zeros(12), FULL) is None


def test_the_rank_summary_from_run_records():
    found = {
        c: {
            "full": {"value": FULL[c], "wall_seconds": 10.0, "epoch1_value": FULL[c] / 3},
            "share25": {"value": FULL[c] - 0.1, "wall_seconds": 3.0},
            "first_look": {"value": FULL[c] / 3, "wall_seconds": 2.5},
        }
        for c in range(12)
    }
    table = fidelity_rank.rank(found, orders=50)
    assert set(table) == {"share25", "first_look"}
    assert table["share25"]["spearman_with_full"] == 1.0
    assert table["share25"]["cost_ratio"] == 0.3
    assert table["share25"]["best_promoted_share_eta3"] == 1.0
    assert set(table["share25"]["budgets"]["eta4"]) == {"4", "8", "16"}


def test_the_drawn_configurations_are_the_restricted_supermax_space():
    configs = fidelity_rank.draw(30, 256)
    assert configs == fidelity_rank.draw(30, 256)  # fixed by the seed
    assert len(configs) == 31 and configs[0]["learning_rate"] == 1.0e-4  # the recipe first
    for params in configs[1:]:
        assert params["adapter"] == "full" and params["max_length"] == 256
        assert params["criteria_formulation"] in ("multilabel", "pairs")
        assert 5.0e-6 <= params["learning_rate"] <= 1.0e-4 and 2 <= params["epochs"] <= 6
        assert ("head_hidden_size" in params) == (params["head_layers"] > 0)
        assert "lora_r" not in params and "post_pooling" not in params
    settings = fidelity_rank.settings(configs[1], "len128", "enc", "data", "cache")
    assert settings["max_length"] == 128 and settings["threshold"] == "fixed"
    assert fidelity_rank.settings(configs[1], "share25", "e", "d", "c")["train_share"] == 0.25
