"""Search strategy: the spec's sampler and pruner, the auto plan (warm start, portfolio, GP,
then TPE), the search space a trial samples, and the wall-clock budget that decides whether
another trial may start."""

from hpo.study.search._budget import start_time_budget, study_deadline, time_budget_spent
from hpo.study.search._factory import first_look_epochs, make_pruner, make_sampler, rung_schedule
from hpo.study.search._fidelity import (
    FidelityCheck,
    fidelity_words,
    is_unprunable,
    promote,
    start_fidelity,
    study_fidelity,
)
from hpo.study.search._portfolio import portfolio_points
from hpo.study.search._sampler import StagedSampler
from hpo.study.search._space import sample_points, suggest
from hpo.study.search._strategy import (
    SearchPlan,
    handover,
    plan_search,
    read_trial_cost,
    record_trial_cost,
    recorded_plan,
)

__all__ = [
    "FidelityCheck",
    "SearchPlan",
    "StagedSampler",
    "fidelity_words",
    "first_look_epochs",
    "handover",
    "is_unprunable",
    "make_pruner",
    "make_sampler",
    "plan_search",
    "portfolio_points",
    "promote",
    "read_trial_cost",
    "record_trial_cost",
    "recorded_plan",
    "rung_schedule",
    "sample_points",
    "start_fidelity",
    "start_time_budget",
    "study_deadline",
    "study_fidelity",
    "suggest",
    "time_budget_spent",
]
