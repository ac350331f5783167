"""The spec's search space as Optuna suggestions: a conditional child only where its condition
holds, and the dry run's points (the warm start first, then the sampler's own), on a study in
memory (no training)."""

from __future__ import annotations

from pathlib import Path

import pytest
from optuna.trial import TrialState

from hpo.spec import load_spec
from hpo.study import open_study
from hpo.study.search import sample_points, suggest
from tests.support.conditional_space import conditional_spec


@pytest.mark.slow
def test_children_are_sampled_only_when_their_condition_holds(tmp_path, storage_url, study_name):
    spec = load_spec(conditional_spec(tmp_path, storage_url, study_name), env={})
    study = open_study(spec)
    study.optimize(lambda trial: suggest(trial, spec)["learning_rate"] * 1000, n_trials=30)
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(trials) == 30
    for trial in trials:
        params = trial.params
        assert ("lora_r" in params) == (params["adapter"] == "lora"), params
        assert ("head_hidden_size" in params) == (params["head_layers"] > 0), params
        spec.train_config(params, None)  # absent children take the TrainConfig defaults
    assert {t.params["adapter"] for t in trials} == {"full", "lora"}, "both branches were explored"
    assert {t.params["head_layers"] > 0 for t in trials} == {True, False}


def test_the_dry_run_samples_the_warm_start_first_then_n_points_and_creates_no_study(
    tmp_path, sqlite_url, study_name
):
    spec = load_spec(conditional_spec(tmp_path, sqlite_url, study_name), env={})
    points = sample_points(spec, n=4)
    assert len(points) == 2 + 4  # the warm start's two, then the sampler's four
    assert points[0] == {"adapter": "full", "head_layers": 0, "learning_rate": 2e-5}
    assert {k: points[1][k] for k in ("adapter", "lora_r", "learning_rate")} == {
        "adapter": "lora",
        "lora_r": 8,
        "learning_rate": 3e-4,
    }
    assert "head_layers" in points[1]  # left out of the warm start: sampled
    for point in points:
        assert ("lora_r" in point) == (point["adapter"] == "lora"), point
        assert ("head_hidden_size" in point) == (point["head_layers"] > 0), point
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # in memory only
