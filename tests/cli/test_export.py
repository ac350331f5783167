"""``hpo export``: a study's trials as CSV (flat columns) or JSON (nested)."""

from __future__ import annotations

import csv
import json

import pytest

from tests.support.cli_studies import BEST
from tests.support.helpers import hpo


def test_export_csv_has_one_row_per_trial_with_flat_columns(
    capsys, finished, postgres_url, tmp_path
):
    out_file = tmp_path / "trials.csv"
    code, _, err = hpo(
        capsys,
        "export",
        finished.study_name,
        "--storage",
        postgres_url,
        "--format",
        "csv",
        "--out",
        str(out_file),
    )
    assert code == 0
    assert f"wrote 4 trials to {out_file}" in err
    with out_file.open(newline="") as stream:
        reader = csv.DictReader(stream)
        rows = list(reader)
        columns = reader.fieldnames
    assert [int(row["number"]) for row in rows] == [0, 1, 2, 3]
    assert [row["state"] for row in rows] == ["COMPLETE", "COMPLETE", "PRUNED", "COMPLETE"]
    for name in (
        "params.learning_rate",
        "params.head_layers",
        "params.pooling",
        "metrics.macro_f1",
        "metrics.accuracy",
        "user_attrs.epochs_run",
        "user_attrs.wall_seconds",
        "user_attrs.checkpoint",
        "datetime_start",
        "value",
    ):
        assert name in columns
    assert not any(column in ("params", "user_attrs", "metrics") for column in columns)
    assert not any(column.startswith("user_attrs.metric") for column in columns)
    for row, trial in zip(rows, finished.trials, strict=True):
        assert float(row["params.learning_rate"]) == pytest.approx(trial.params["learning_rate"])
        assert row["params.pooling"] == trial.params["pooling"]
    assert float(rows[BEST]["metrics.macro_f1"]) == pytest.approx(0.87)
    assert float(rows[BEST]["metrics.accuracy"]) == pytest.approx(0.91)
    # pruned: Optuna keeps its last report as the value; it has no metrics
    assert float(rows[2]["value"]) == pytest.approx(0.05) and rows[2]["metrics.macro_f1"] == ""
    assert rows[2]["user_attrs.epochs_run"] == "1"


def test_export_json_keeps_the_nesting(capsys, finished, postgres_url, tmp_path):
    out_file = tmp_path / "trials.json"
    code, _, _ = hpo(
        capsys,
        "export",
        finished.study_name,
        "--storage",
        postgres_url,
        "--format",
        "json",
        "--out",
        str(out_file),
    )
    assert code == 0
    rows = json.loads(out_file.read_text())
    assert len(rows) == 4
    assert rows[BEST]["value"] == pytest.approx(0.87)
    assert rows[BEST]["params"] == finished.trials[BEST].params
    assert rows[BEST]["metrics"] == {"macro_f1": 0.87, "accuracy": 0.91}
    assert rows[2]["state"] == "PRUNED" and rows[2]["metrics"] == {}
    assert all(row["datetime_start"] for row in rows)


def test_export_to_standard_output(capsys, finished, postgres_url):
    code, out, _ = hpo(
        capsys, "export", finished.study_name, "--storage", postgres_url, "--format", "csv"
    )
    assert code == 0
    rows = list(csv.DictReader(out.splitlines()))
    assert len(rows) == 4 and rows[BEST]["metrics.macro_f1"] == "0.87"


def test_export_replaces_an_earlier_export_but_another_file_only_with_force(
    capsys, finished, postgres_url, tmp_path
):
    """`hpo export --out data/redsm5_posts.csv` replaced the study's own posts without a word."""
    posts = tmp_path / "redsm5_posts.csv"
    posts.write_text("post_id,text\n1,hello\n")
    argv = ["export", finished.study_name, "--storage", postgres_url, "--out", str(posts)]
    code, _, err = hpo(capsys, *argv)
    assert code == 2 and err.count("\n") == 1, err
    assert f"refusing to overwrite {posts}: it exists and is not a trials export" in err
    assert "pass --force to replace it" in err and posts.read_text() == "post_id,text\n1,hello\n"
    for fmt in ("csv", "json"):  # a rerun replaces its own export, in either format
        out = tmp_path / f"trials.{fmt}"
        for _ in range(2):
            code, _, err = hpo(capsys, *argv[:-1], str(out), "--format", fmt)
            assert code == 0, err
    code, _, err = hpo(capsys, *argv, "--force")
    assert code == 0 and posts.read_text().startswith("number,"), err
