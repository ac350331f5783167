"""How a ``sampler: {name: auto}`` study spends its budget: the decision between TPE alone and a
portfolio around the warm start sampled on by GP until TPE takes over (pure), and the trial cost
``hpo validate --estimate`` records for it."""

from __future__ import annotations

from hpo.study.search import handover, plan_search, read_trial_cost, record_trial_cost
from tests.support.auto_specs import auto_spec


def test_a_few_trial_budget_runs_the_portfolio_then_gp_until_tpe_can_model():
    plan = plan_search(auto_spec())
    assert plan.strategy == "portfolio" and plan.budget_trials == 12
    # ten per searched parameter (4), and never before TPE's 10 random startup trials are over
    assert plan.handover == plan.gp_until == 40 == handover(auto_spec())
    assert [label for label, _ in plan.portfolio] == [
        "class_weighting balanced -> sqrt",  # epochs 4 x 1.5 leaves the space: no longer run
        "learning_rate 0.0001 -> 0.0002",
        "learning_rate 0.0001 -> 0.0003",
        "class_weighting balanced -> none",
        "epochs 4 -> 3",  # these two lost on every seed on the real posts: after the unmeasured
        "learning_rate 0.0001 -> 5e-05",
    ]
    assert plan.to_attr()["gp_until"] == 40


def test_the_portfolio_never_outgrows_the_budget_and_a_timeout_counts_with_an_estimate():
    spec = auto_spec(n_trials=100, timeout=3600)
    # the job: ~35 min a trial, 2 workers, an hour: about 3 full trials
    plan = plan_search(spec, trial_seconds=2100, workers=2)
    assert plan.strategy == "portfolio" and plan.budget_trials == 3
    assert [label for label, _ in plan.portfolio] == [
        "class_weighting balanced -> sqrt",
        "learning_rate 0.0001 -> 0.0002",
    ]
    assert "timeout 1h00m x 2 workers / 35m00s a trial" in plan.describe()[0]
    # a timeout with no measured trial cost is taken as few trials: TPE's random start could be
    # the whole budget, while the portfolio and GP cost little if trials turn out cheap
    unmeasured = plan_search(spec)
    assert (unmeasured.strategy, unmeasured.budget_trials) == ("portfolio", None)
    assert len(unmeasured.portfolio) == 6 and unmeasured.gp_until == 40
    assert unmeasured.describe()[0].startswith(
        "strategy: a timeout of 1h00m with no trial cost measured (hpo validate --estimate) is "
        "taken as fewer than 40 full trials, the safe side: the warm start, a portfolio of 6"
    )
    # with neither, n_trials decides
    assert plan_search(auto_spec(n_trials=100)).strategy == "tpe"


def test_a_budget_of_many_trials_runs_tpe_from_the_first():
    plan = plan_search(auto_spec(n_trials=40))
    assert (plan.strategy, plan.gp_until, plan.portfolio) == ("tpe", 0, ())
    assert "TPE from the first trial" in plan.describe()[0]
    # a larger TPE startup than ten per parameter moves the handover with it
    slow = auto_spec(sampler={"name": "auto", "options": {"n_startup_trials": 60}})
    assert handover(slow) == 60


def test_no_warm_start_means_no_portfolio_and_the_plan_says_why():
    plan = plan_search(auto_spec(warm_start=[]))
    assert plan.strategy == "portfolio" and plan.portfolio == ()
    assert "no warm_start" in plan.describe()[1]


def test_a_recorded_cost_is_read_only_for_the_data_and_encoders_it_timed(tmp_path):
    """Issue #55 item 15: `validate --estimate`'s record, keyed on the settings alone, was reused
    ("from hpo validate --estimate") by a later study of another encoder."""
    spec = auto_spec(tmp_path, model_paths={"x": str(tmp_path / "small")})
    record_trial_cost(spec, 600.0, 2)
    assert read_trial_cost(spec) == (600.0, 2)
    other_encoder = auto_spec(tmp_path, model_paths={"x": str(tmp_path / "large")})
    other_data = auto_spec(tmp_path, model_paths={"x": str(tmp_path / "small")}, data_dir="real")
    assert read_trial_cost(other_encoder) is None and read_trial_cost(other_data) is None
