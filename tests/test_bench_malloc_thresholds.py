"""bench/malloc_thresholds.py times the same trials under glibc's thresholds before and after
f9aac69: its spec is the real job's shape and valid, and its committed results file says what
its runs say."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench.malloc_thresholds import NAME, spec
from bench.search_budget import mean_interval
from hpo.spec import load_spec

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / f"{NAME}.json"


def test_both_sides_run_one_spec_of_the_real_jobs_shape(tmp_path):
    before = load_spec(spec("before", 0, "encoder", str(tmp_path))[1])
    after = load_spec(spec("after", 0, "encoder", str(tmp_path))[1])
    assert before.name != after.name
    assert before.model_dump(exclude={"name", "source"}) == after.model_dump(
        exclude={"name", "source"}
    )
    assert before.train["max_length"] == 256 and before.train["long_text"] == "head_tail"


def test_the_results_files_verdict_is_its_runs_paired_by_repeat():
    result = json.loads(RESULTS.read_text())
    runs = result["runs"]
    assert len(runs["before"]) == len(runs["after"]) >= 5
    pairs = [
        (before, after)
        for before, after in zip(runs["before"], runs["after"], strict=True)
        if before["repeat"] == after["repeat"]
    ]
    assert len(pairs) == len(runs["before"]), "paired by repeat"
    ratios = [after["trial_s"] / before["trial_s"] for before, after in pairs]
    details = result["details"]
    assert details["after_over_before"] == round(statistics.mean(ratios), 3)
    low, high = mean_interval(ratios)
    assert details["after_over_before_interval"] == [low, high]
    assert details["verdict"] == (
        "faster" if high < 1 else "slower" if low > 1 else "no difference shown"
    )
    assert details["same_values"] == all(b["values"] == a["values"] for b, a in pairs)
