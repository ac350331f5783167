"""bench/search_budget.py's verdict: a difference is called a gain only where the interval over
repeats says so, and the per-rung rates and the plan are the arithmetic they claim."""

from __future__ import annotations

import optuna

from bench.search_budget import REPEATS, per_rung_rate, plan, verdict


def arms(a: list[float], c: list[float]) -> dict[str, list[dict]]:
    def runs(values, first_rung):
        return [
            {"test_post_macro_f1": v, "configurations_per_hour": {str(first_rung): 8.0}}
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
