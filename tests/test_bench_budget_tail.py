"""bench/budget_tail.py measures a budget's tail under the start rule before and after
b086acf: it counts the step the search's pruner first judges at, and its committed results
file says what its runs say."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench.budget_tail import FIRST_RUNG, NAME, SHARE
from bench.search_budget import mean_interval, spec
from hpo.spec import load_spec
from hpo.study import first_look_epochs

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / f"{NAME}.json"


def test_the_bench_counts_the_step_its_searchs_pruner_first_judges_at(tmp_path):
    _, path = spec("c_issue35", 0, "encoder", str(tmp_path), SHARE, name="tail-check")
    assert first_look_epochs(load_spec(path)) == FIRST_RUNG


def test_the_results_files_verdict_is_its_runs_paired_by_repeat():
    result = json.loads(RESULTS.read_text())
    runs = result["runs"]
    assert len(runs["before"]) == len(runs["after"]) >= 5
    gains = [
        after["first_rung_configurations"] - before["first_rung_configurations"]
        for before, after in zip(runs["before"], runs["after"], strict=True)
        if before["repeat"] == after["repeat"]
    ]
    assert len(gains) == len(runs["before"]), "paired by repeat"
    details = result["details"]
    assert details["after_minus_before"] == round(statistics.mean(gains), 2)
    assert details["after_minus_before_interval"] == mean_interval(gains)
    low, high = mean_interval(gains)
    assert details["verdict"] == (
        "more" if low > 0 else "fewer" if high < 0 else "no difference shown"
    )
    for run in runs["before"] + runs["after"]:
        assert run["first_rung_configurations"] <= run["trials_started"]
