"""finalize's plan, said before anything trains, and the line a finalized study gets when its
search has found better since. Studies as ``hpo tune`` makes them, with made-up values."""

from __future__ import annotations

import pytest

from hpo.final.options import FinalizeOptions
from hpo.final.plan import better_since, plan, plan_lines
from hpo.final.summary import FinalSummary
from hpo.spec import load_spec
from hpo.study import open_study
from hpo.study.search import suggest
from tests.support import REPO
from tests.support.helpers import final_summary

SPEC = str(REPO / "studies" / "criteria-smoke.yaml")

pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # ask/tell, no worker


def _study(tmp_path, values: list[float], repeat_first: bool = False):
    """A study whose trials were told ``values``; ``repeat_first``: every trial re-runs the
    first one's parameters (one distinct configuration)."""
    spec = load_spec(
        SPEC, ["name=planned", f"output_dir={tmp_path}"], f"sqlite:///{tmp_path / 'db.sqlite'}"
    )
    study = open_study(spec)
    for value in values:
        if repeat_first and study.trials:
            study.enqueue_trial(study.trials[0].params)
        trial = study.ask()
        suggest(trial, spec)
        study.tell(trial, value)
    return spec, study


def test_the_plan_names_the_configurations_the_retrainings_and_what_they_make(tmp_path):
    spec, study = _study(tmp_path, [0.51, 0.55, 0.53, 0.50])
    settings = FinalizeOptions(top_k=2, seeds=3, cv=3).settings()
    runs = plan(spec, study, 2, 3)

    lines = plan_lines(spec, study, runs, settings, 2, "out_of_fold")

    assert lines[0] == "finalize planned: the plan"
    assert lines[1] == (
        "  configurations  the best 2 of the study's 4 distinct completed: "
        "trial 1 (macro_f1 0.5500), trial 2 (macro_f1 0.5300)"
    )
    assert lines[2] == (
        "  retrainings     3 seed(s) each: 6, then 3 more of the chosen one; 2 at a time "
        "(--workers 2)"
    )
    # trials told made-up values kept no checkpoint: every seed is retrained, and each
    # configuration's first seed says why it is not its trial's model
    assert lines[3:5] == [
        "  reuse           trial_1-seed_0: retrained, as its checkpoint was not kept "
        "(keep_top_k) or is gone",
        "                  trial_2-seed_0: retrained, as its checkpoint was not kept "
        "(keep_top_k) or is gone",
    ]
    assert "its 3 seeds averaged into one (--ensemble seeds)" in lines[6]
    assert "3 folds of train + validation" in lines[7]
    assert "out-of-fold" in lines[8]


def test_the_plan_says_when_the_study_has_fewer_configurations_than_top_k(tmp_path):
    # four trials of one configuration: --top-k 3 retrains that one, and says so
    spec, study = _study(tmp_path, [0.61, 0.60, 0.62, 0.59], repeat_first=True)
    runs = plan(spec, study, 3, 1)
    assert {run.trial for run in runs} == {2}

    lines = plan_lines(spec, study, runs, FinalizeOptions(seeds=1).settings(), 1, "fixed")

    assert lines[1] == (
        "  configurations  the study's 1 distinct completed (fewer than --top-k 3): "
        "trial 2 (macro_f1 0.6200)"
    )
    assert lines[5] == "  model           its one seed, as trained on train (--refit train)"


def test_a_finalized_study_names_a_better_trial_found_since(tmp_path):
    spec, study = _study(tmp_path, [0.51, 0.55, 0.53])
    real = final_summary("ensemble")  # as finalize --top-k 2 left it: trials 1 and 2
    summary = FinalSummary.model_validate(
        real
        | {
            "configurations": [
                real["configurations"][0] | {"trial": 1},
                real["configurations"][1] | {"trial": 2},
            ]
        }
    )
    assert better_since(spec, study, summary) is None

    trial = study.ask()
    suggest(trial, spec)
    study.tell(trial, 0.54)  # not better than trial 1
    assert better_since(spec, study, summary) is None

    trial = study.ask()
    suggest(trial, spec)
    study.tell(trial, 0.58)
    assert better_since(spec, study, summary) == (
        "the study's best is now trial 4 (macro_f1 0.5800), found after this final was made "
        "from trial 1 (0.5500) and the others it retrained"
    )
