"""How good a model is, as the hpo finalize summary beside it says, and whether a whole-post
model ranks the evidence well enough to stand for the evidence model too."""

from __future__ import annotations

import json

import pytest

from tests.support.helpers import final_summary

BETTER = {
    "evidence_average_precision": 0.7,
    "evidence_recall_at_1": 0.7,
    "evidence_recall_at_3": 0.9,
}


THEIRS = {"average_precision": 0.69, "recall_at_1": 0.67, "recall_at_3": 0.9}


@pytest.mark.parametrize(
    "own, theirs, both",
    [
        (BETTER, THEIRS, True),  # at least as good on every figure (recall_at_3 equal)
        ({**BETTER, "evidence_recall_at_1": 0.6}, THEIRS, False),  # worse on one
        (BETTER, None, False),  # no summary beside the evidence model: nothing to compare
    ],
)
def test_a_whole_post_model_ranks_the_evidence_itself_only_where_at_least_as_good(
    tmp_path, own, theirs, both
):
    """Issue #49 item 3: on validation, as each model's finalize measured it."""
    from hpo.explain.quality import one_model_for_both

    for role, validation in (("criteria", own), ("evidence", theirs)):
        final = tmp_path / role / "final"
        (final / "model").mkdir(parents=True)
        if validation is not None:
            real = final_summary()
            summary = final_summary(chosen={**real["chosen"], "validation": validation})
            (final / "metrics.json").write_text(json.dumps(summary))
    chosen, why = one_model_for_both(
        tmp_path / "criteria" / "final" / "model", tmp_path / "evidence" / "final" / "model"
    )
    assert chosen is both
    if theirs is not None:
        assert "average_precision 0.700 vs 0.690" in why and "recall_at_1" in why
    assert ("one model for both" in why) is both
