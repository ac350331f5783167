"""Scoring a prepared split: the per-symptom table a model card shows."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from hpo.data import SYMPTOMS
from hpo.fixtures import write_sample
from hpo.train.config import TrainConfig
from hpo.train.evaluate import INTERVAL_METRICS, metrics_at, per_symptom, post_intervals
from hpo.train.prepare import prepare_data

ABSENT = "PSYCHOMOTOR"


def test_a_symptom_with_no_example_in_the_split_has_support_0_and_no_f1(tmp_path, tiny_roberta):
    # An evidence split holds sentences of the symptoms its posts show: a 200-post sample's test
    # split may hold none of one symptom (make demo-explain's did), and scikit-learn refuses to
    # count an empty array.
    data_dir = write_sample(tmp_path / "data", posts=60, seed=0)
    annotations = data_dir / "redsm5_annotations.csv"
    with annotations.open(newline="") as stream:
        rows = [row for row in csv.DictReader(stream) if row["DSM5_symptom"] != ABSENT]
    with annotations.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    config = TrainConfig(task="evidence", encoder=str(tiny_roberta), data_dir=str(data_dir))
    test = prepare_data(config).test
    probs = np.random.default_rng(0).random((len(test), 1))

    table = per_symptom(test, probs, dict.fromkeys(SYMPTOMS, 0.5))

    assert table[ABSENT] == {
        "f1": None,
        "precision": None,
        "recall": None,
        **dict.fromkeys(("tp", "fp", "fn", "tn", "support"), 0),
    }
    labels = test.tokens.labels
    criteria = np.array(test.criteria)
    for symptom in set(SYMPTOMS) - {ABSENT}:
        row = table[symptom]
        assert row["support"] == int(labels[criteria == symptom].sum())
        assert row["tp"] + row["fp"] + row["fn"] + row["tn"] == int((criteria == symptom).sum())


@pytest.mark.parametrize("task", ["criteria", "evidence"])
def test_the_studys_macro_f1_gets_a_bootstrap_interval_over_the_splits_posts(
    task, tmp_path, tiny_roberta
):
    data_dir = write_sample(tmp_path / "data", posts=60, seed=0)
    config = TrainConfig(task=task, encoder=str(tiny_roberta), data_dir=str(data_dir))
    test = prepare_data(config).test
    probs = np.random.default_rng(0).random((len(test), test.num_labels))
    thresholds = dict.fromkeys(SYMPTOMS, 0.5)

    found = post_intervals(test, probs, thresholds, ("macro_f1", *INTERVAL_METRICS, "auroc"))

    # the post-level F1s are criteria's alone; auroc has no F1 to bootstrap
    assert list(found) == (["macro_f1", *INTERVAL_METRICS] if task == "criteria" else ["macro_f1"])
    point = metrics_at(test, probs, thresholds)
    for name, interval in found.items():
        assert interval["posts"] == len(set(test.post_ids)) and interval["level"] == 0.95
        assert interval["low"] <= point[name] <= interval["high"], name
