"""End to end: `hpo tune` screens at a low fidelity with two workers on PostgreSQL under a time
budget: the check pairs, the screened runs, what status and the dashboard note say."""

from __future__ import annotations

import subprocess

import pytest
from optuna.trial import TrialState
from optuna_dashboard import get_note

from hpo.attributes import (
    CHECKED_ATTR,
    CHECKPOINT_ATTR,
    PROMOTED_FROM_ATTR,
    TRAIN_SHARE_ATTR,
    TWIN_OF_ATTR,
)
from tests.support.helpers import hpo_argv
from tests.support.shared_storage import read_study
from tests.support.tune_cli import run_tune, tune_assets

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def test_tune_checks_then_screens_under_a_time_budget(
    tmp_path, postgres_url, study_name, tiny_roberta, tiny_deberta
):
    assets = tune_assets(tmp_path, tiny_roberta, tiny_deberta)
    run = run_tune(
        "criteria-smoke.yaml",
        study_name,
        postgres_url,
        assets,
        2,
        "--timeout",
        "75s",
        *("--set", "n_trials=200"),  # the time budget ends the study
        *("--set", "search_space.encoder.choices=[tiny-roberta]"),
        *("--set", "fidelity.train_share=0.5"),
        *("--set", "fidelity.check=3"),
        # any correlation passes: the test is of the mechanics, the unit tests of the decision
        *("--set", "fidelity.min_rank_correlation=-1"),
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    study = read_study(study_name, postgres_url)
    trials = study.get_trials(deepcopy=False)
    assert 0 < len(trials) < 200
    checks = {t.number: t for t in trials if CHECKED_ATTR in t.user_attrs}
    twins = [t for t in trials if TWIN_OF_ATTR in t.user_attrs]
    assert len(checks) >= 3 and len(twins) == len(checks)
    for twin in twins:  # the same configuration, on half the training posts, never pruned
        assert _configuration(twin) == checks[twin.user_attrs[TWIN_OF_ATTR]].params
        assert twin.user_attrs[TRAIN_SHARE_ATTR] == 0.5
    assert not [t for t in checks.values() if t.state == TrialState.PRUNED]
    screened = [t for t in trials if TRAIN_SHARE_ATTR in t.user_attrs and t not in twins]
    assert screened, "after the check, sampled configurations are screened"
    for low in [*twins, *screened]:  # no report beside full runs', no checkpoint kept
        assert low.intermediate_values == {} and CHECKPOINT_ATTR not in low.user_attrs
    for full in (t for t in trials if PROMOTED_FROM_ATTR in t.user_attrs):
        source = next(t for t in trials if t.number == full.user_attrs[PROMOTED_FROM_ATTR])
        assert _configuration(full) == source.params and TRAIN_SHARE_ATTR not in full.user_attrs
        assert full.state != TrialState.PRUNED, "a promoted configuration runs its whole schedule"
    assert study.user_attrs["fidelity_check"]["phase"] == "screening"
    assert "screened on 50% of the training posts" in run.stderr + run.stdout
    assert "- **Low fidelity**: configurations screened on 50%" in get_note(study)
    status = subprocess.run(
        [*hpo_argv("status", study_name, "--storage", postgres_url)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "fidelity: screening at 50% of the training posts: rank correlation" in status.stdout
    best = subprocess.run(
        [*hpo_argv("best", study_name, "--storage", postgres_url)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    full_best = max(
        (
            t
            for t in trials
            if t.state == TrialState.COMPLETE and TRAIN_SHARE_ATTR not in t.user_attrs
        ),
        key=lambda t: t.value,
    )
    assert f"trial {full_best.number}" in best.stdout, best.stdout


def _configuration(trial):
    """The parameters ``trial`` runs with: a run the time budget left queued has none yet,
    only the ones Optuna's ``enqueue_trial`` fixed for it."""
    if trial.state == TrialState.WAITING:
        return trial.system_attrs["fixed_params"]
    return trial.params
