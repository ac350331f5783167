"""bench/whole_post.py --keep-runs: an arm the results file holds on the same data, recipe and
settings is read from it, never one whose settings, data or seeds differ."""

from __future__ import annotations

import json
from argparse import Namespace

import pytest

import bench.whole_post as bench
from bench.results import data_identity
from bench.workload import RECIPE
from hpo.fixtures import write_sample

SQRT = "whole_post + sentence loss, sqrt"


@pytest.fixture
def held(tmp_path, monkeypatch):
    """A results file of two arms at three seeds on a small sample, in a results folder of
    its own; returns (data, results file, args of a three-seed bench)."""
    data = write_sample(tmp_path / "data", posts=20, seed=0)
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "results")
    bench.RESULTS.mkdir()

    def runs(arm):
        return [
            {"seed": seed, "test_post_macro_f1": 0.5 + seed / 10, "arm": arm} for seed in (2, 0, 1)
        ]

    results = {
        "workload": {
            "data_fingerprint": data_identity(data)["data_fingerprint"],
            "recipe": {**RECIPE, "max_length": 256, "threshold": "fixed"},
            "arms": {arm: bench.ARMS[arm] for arm in ("head_tail", SQRT)},
        },
        "runs": {arm: runs(arm) for arm in ("head_tail", SQRT)},
    }
    path = bench.RESULTS / f"{bench._results_name(data_identity(data))}.json"
    path.write_text(json.dumps(results))
    return data, path, Namespace(seeds=3, max_length=256)


def _kept(data, arms, args) -> dict:
    """What --keep-runs reads for ``arms`` on ``data`` from its results file."""
    identity = data_identity(data)
    return bench._kept_runs(bench._held(bench._results_name(identity)), identity, arms, args)


def test_the_arms_held_on_the_same_data_and_settings_are_read_in_seed_order(held):
    data, _, args = held
    new = "whole_post + sentence loss + hard negatives, sqrt"
    kept = _kept(data, ["head_tail", SQRT, new], args)
    assert list(kept) == ["head_tail", SQRT], "the new arm is trained"
    assert [run["seed"] for run in kept[SQRT]] == [0, 1, 2]
    assert {run["arm"] for run in kept[SQRT]} == {SQRT}


def test_an_arm_is_trained_again_where_its_settings_tokens_seeds_or_data_differ(held, tmp_path):
    data, path, args = held
    assert _kept(data, ["head_tail"], Namespace(seeds=4, max_length=256)) == {}
    assert _kept(data, ["head_tail"], Namespace(seeds=3, max_length=128)) == {}
    other = write_sample(tmp_path / "other", posts=20, seed=1)  # other posts, one results name
    assert _kept(other, ["head_tail"], args) == {}
    results = json.loads(path.read_text())
    results["workload"]["arms"][SQRT] = {**bench.ARMS[SQRT], "class_weighting": "balanced"}
    path.write_text(json.dumps(results))
    assert list(_kept(data, ["head_tail", SQRT], args)) == ["head_tail"]
