"""finalize's result as the study shows it (hpo.final.record): the artifacts' names and the
seeds' spread and test figures as one plain line each, from a real metrics.json that
``hpo finalize --cv`` wrote, every figure counted by hand. The module is imported whole: its
``test_line`` and ``test_figure`` are no tests."""

from __future__ import annotations

import json

import pytest

from hpo.final import record
from hpo.final.summary import FinalSummary
from tests.support import FINAL_SUMMARIES


@pytest.fixture
def summary() -> FinalSummary:
    document = json.loads((FINAL_SUMMARIES / "cv" / "metrics.json").read_text())
    return FinalSummary.model_validate(document)


def test_an_artifact_is_named_for_the_chosen_trial_and_when_finalize_finished(summary):
    # finished 2026-11-27T18:39:34+00:00, trial 3 chosen
    assert record.artifact_name("model_card.md", summary) == "model_card-trial3-20261127T183934Z.md"
    assert record.artifact_name("metrics.json", summary) == "metrics-trial3-20261127T183934Z.json"


def test_the_test_line_leads_with_the_papers_metric_then_the_studys_then_the_intervals(summary):
    assert record.headline("macro_f1", summary.test) == ("post_macro_f1", "macro_f1")
    assert record.headline("post_macro_f1", summary.test) == ("post_macro_f1",)
    assert record.test_line("macro_f1", "out_of_fold", summary.test) == (
        "test, scored once at out-of-fold thresholds: "
        "post_macro_f1 0.3704 (95% CI 0.1515-0.4222, 12 posts); "
        "macro_f1 0.6960 (95% CI 0.5887-0.7880, 12 posts); "
        "post_micro_f1 0.4848 (95% CI 0.2759-0.6400, 12 posts)"
    )
    # a metric without an interval is its value alone; no rule is the fixed thresholds
    assert record.test_figure(summary.test, "f1") == "f1 0.4848"
    assert record.test_line("f1", None, summary.test).startswith(
        "test, scored once at fixed thresholds: post_macro_f1 0.3704 (95% CI"
    )


def test_the_seed_spread_line_gives_the_mean_sd_and_range_over_the_seeds(summary):
    assert record.seed_spread_line("macro_f1", summary.configurations[0]) == (
        "trial 3's configuration, validation macro_f1 over 1 seed(s): "
        "0.6575 ± 0.0000 (sd), min 0.6575, max 0.6575"
    )
