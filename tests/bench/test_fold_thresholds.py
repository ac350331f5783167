"""bench/fold_thresholds.py trains what ``hpo finalize --seeds S --cv 3`` trains (the seeds on
train, seed 0 on each fold of train + validation) and decides the same test posts by each
rule, so that a rule's paired gain is the difference of the rules' own figures."""

from __future__ import annotations

import pytest

from bench import fold_thresholds
from bench.trainings import config_of, train_one
from hpo.fixtures import write_sample


def test_the_models_are_finalizes_seeds_and_its_folds_of_each_split(tmp_path):
    seed_jobs, fold_jobs = fold_thresholds._jobs("enc", tmp_path, 64, "t", 1, seeds=2)
    assert [(job["seed"], job["point"]) for job in seed_jobs] == [(0, {}), (1, {})]
    assert [(job["seed"], job["point"]) for job in fold_jobs] == [
        (0, {"cv_fold": (3, i)}) for i in range(3)
    ]
    configs = [config_of(job) for job in [*seed_jobs, *fold_jobs]]
    assert {config.split_seed for config in configs} == {1}
    assert len({config.checkpoint_dir for config in configs}) == 5
    other, _ = fold_thresholds._jobs("enc", tmp_path, 64, "t", 0, seeds=2)
    assert not {j["folder"] for j in other} & {j["folder"] for j in seed_jobs}


@pytest.mark.slow
def test_each_rule_decides_the_same_test_posts_and_its_gain_is_the_difference(
    tmp_path, tiny_roberta, monkeypatch
):
    from bench.portfolio_moves import paired_gain

    monkeypatch.setattr(fold_thresholds, "RUNS", tmp_path / "runs")
    data = tmp_path / "data"
    write_sample(data, posts=60, seed=0, profile="realistic")
    seed_jobs, fold_jobs = fold_thresholds._jobs(str(tiny_roberta), data, 64, "t", 0, seeds=2)
    for job in [*seed_jobs, *fold_jobs]:
        train_one(job)
    run, decided = fold_thresholds.one_split(seed_jobs, fold_jobs)

    assert run["test_posts"] == len(decided["truth"])
    assert run["true_cells"] == decided["truth"].sum()
    assert run["thresholds"]["out_of_fold"] != dict.fromkeys(run["thresholds"]["out_of_fold"], 0.5)
    for rule in fold_thresholds.RULES:
        assert decided[rule].shape == decided["truth"].shape
        assert run[f"{rule}_called_cells"] == decided[rule].sum()
        low, high = run[f"{rule}_interval"]
        assert low <= run[rule] <= high
        gain = paired_gain(decided["truth"], [decided[rule]], [decided["fixed"]], resamples=50)
        assert gain["gain"] == pytest.approx(run[rule] - run["fixed"], abs=2e-4)
