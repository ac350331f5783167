"""``sampler: {name: auto}``'s StagedSampler on real ask/tell: GP, then TPE at the count the
study's recorded plan names, under Hyperband too."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from hpo.attributes import PLAN_ATTR, SAMPLED_BY_ATTR
from hpo.spec import StudySpec
from hpo.study.search import StagedSampler, make_sampler, plan_search, suggest
from tests.support.auto_specs import auto_spec


def _ask_tell(study: optuna.Study, spec: StudySpec, n: int) -> list[str]:
    for index in range(n):
        trial = study.ask()
        suggest(trial, spec)
        study.tell(trial, 0.1 + (index % 3) / 10)
    return [t.system_attrs[SAMPLED_BY_ATTR] for t in study.trials]


def test_the_staged_sampler_samples_with_gp_then_hands_over_to_tpe():
    spec = auto_spec()
    tpe = optuna.samplers.TPESampler(seed=0, n_startup_trials=2)
    gp = optuna.samplers.GPSampler(seed=0, n_startup_trials=2, warn_independent_sampling=False)
    study = optuna.create_study(direction="maximize", sampler=StagedSampler(gp, tpe, gp_until=4))
    assert _ask_tell(study, spec, 6) == ["gp"] * 4 + ["tpe"] * 2
    # GP modelled from its second complete trial: it shares what it proposed with other workers
    # in these system attributes (Optuna's GPSampler, trials 2 and 3 only)
    modelled = [
        any(key.startswith("gp:relative_params") for key in t.system_attrs) for t in study.trials
    ]
    assert modelled == [False, False, True, True, False, False]
    # a pruned trial counts as finished, as for n_trials and TPE's startup
    pruned = optuna.create_study(direction="maximize", sampler=StagedSampler(gp, tpe, gp_until=1))
    trial = pruned.ask()
    suggest(trial, spec)
    pruned.tell(trial, state=TrialState.PRUNED)
    assert _ask_tell(pruned, spec, 1) == ["gp", "tpe"]


def test_the_plan_a_study_recorded_decides_when_every_worker_hands_over():
    spec = auto_spec(n_trials=40)  # TPE from the first trial
    study = optuna.create_study(direction="maximize", sampler=make_sampler(spec, "node/0"))
    study.set_user_attr(PLAN_ATTR, plan_search(spec).to_attr())
    assert _ask_tell(study, spec, 2) == ["tpe", "tpe"]
    few = optuna.create_study(direction="maximize", sampler=make_sampler(auto_spec(), "node/1"))
    few.set_user_attr(PLAN_ATTR, plan_search(auto_spec()).to_attr())
    assert _ask_tell(few, auto_spec(), 3) == ["gp"] * 3


def test_the_staged_sampler_works_under_hyperband_and_counts_the_whole_study():
    """HyperbandPruner hands samplers a bracket's view of the study (no user_attrs, only that
    bracket's trials): the plan and the finished count still come from the whole study (the
    shipped supermax specs pair sampler auto with Hyperband; this crashed hpo validate)."""
    spec = auto_spec(n_trials=40)
    pruner = optuna.pruners.HyperbandPruner(min_resource=1, max_resource=9, reduction_factor=3)
    study = optuna.create_study(
        direction="maximize", sampler=make_sampler(auto_spec(), "node/0"), pruner=pruner
    )
    study.set_user_attr(PLAN_ATTR, {**plan_search(auto_spec()).to_attr(), "gp_until": 3})
    assert _ask_tell(study, spec, 5) == ["gp"] * 3 + ["tpe"] * 2
