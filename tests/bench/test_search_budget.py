"""bench/search_budget.py's verdict: a difference is called a gain only where the interval over
repeats says so, and the per-rung rates and the plan are the arithmetic they claim."""

from __future__ import annotations

import optuna

from bench import pruning_regret, run
from bench.search_budget import REPEATS, RESULTS, per_rung_rate, plan, verdict, what_was_chosen
from bench.workload import RECIPE, SHARES


def arms(a: list[float], c: list[float]) -> dict[str, list[dict]]:
    def runs(values, first_rung):
        return [
            {
                "test_post_macro_f1": v,
                "configurations_per_hour": {str(first_rung): 8.0},
                "chosen_params": RECIPE,
            }
            for v in values
        ]

    return {"a_recipe": runs(a, 2), "b_before": runs(a, 2), "c_issue35": runs(c, 1)}


def test_a_consistent_lead_is_a_gain_and_noise_is_not():
    steady = verdict(arms([0.60, 0.61, 0.59, 0.60, 0.62], [0.66, 0.67, 0.65, 0.66, 0.68]))
    assert steady["c_vs_a"] == "gain" and steady["c_minus_a_interval"][0] > 0
    assert steady["c_beats_a_by_more_than_half_width"]
    noisy = verdict(arms([0.60, 0.50, 0.70, 0.55, 0.65], [0.70, 0.45, 0.62, 0.52, 0.71]))
    assert noisy["c_vs_a"] == "no difference shown"
    low, high = noisy["c_minus_a_interval"]
    assert low < 0 < high


def test_configurations_per_hour_count_trials_reporting_at_each_step():
    study = optuna.create_study()
    for reached in (1, 1, 4, 16):
        trial = study.ask()
        for step in (1, 4, 16):
            if step <= reached:
                trial.report(0.5, step)
        study.tell(trial, 0.5)
    assert per_rung_rate(study, 1800) == {"1": 8.0, "4": 4.0, "16": 2.0}


def test_the_plan_adds_the_budget_and_the_retrains():
    hours = plan(1800, repeats=REPEATS)
    assert hours["trial_hours"] == 0.5
    assert hours["hours_total"] == round(REPEATS * sum(hours["hours_per_repeat"].values()), 1)


def test_each_share_writes_its_own_results_file_and_bench_run_names_it():
    """A run of one share never overwrites another's figures, and ``--only`` reaches each."""
    assert set(RESULTS) == set(SHARES)
    assert len(set(RESULTS.values())) == len(RESULTS)
    assert set(RESULTS.values()) == set(run.MEASURES["search_budget"])
    for share in SHARES:
        args = run.parser().parse_args(["--only", RESULTS[share], "--share", share])
        assert run.chosen(args.only) == ["search_budget"]
    # pruning_regret runs on search_budget's shares: each has its file there too
    assert set(pruning_regret.RESULTS) == set(SHARES)
    # and the real data its own
    files = {*pruning_regret.RESULTS.values(), pruning_regret.REAL_RESULTS}
    assert len(files) == len(SHARES) + 1
    assert files == set(run.MEASURES["pruning_regret"])


def test_where_both_searches_finalize_the_same_configuration_the_difference_is_thresholds():
    """(c) - (b) is kept only for the repeats where both chose the same configuration; the
    recipe's count is per arm."""
    moved = {**RECIPE, "class_weighting": "sqrt"}

    def run(value, params):
        return {"test_post_macro_f1": value, "chosen_params": params}

    runs = {
        "b_before": [run(0.40, RECIPE), run(0.50, RECIPE), run(0.30, moved)],
        "c_issue35": [run(0.38, RECIPE), run(0.60, moved), run(0.26, moved)],
    }
    found = what_was_chosen(runs)
    assert found["b_before_chose_the_recipe"] == 2
    assert found["c_issue35_chose_the_recipe"] == 1
    assert found["same_choice_repeats"] == 2  # repeats 0 and 2
    assert found["same_choice_c_minus_b"] == -0.03
    low, high = found["same_choice_c_minus_b_interval"]
    assert low <= -0.03 <= high
