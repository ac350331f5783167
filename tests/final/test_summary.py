"""finalize's summary as one model (hpo.final.summary): real metrics.json files, written by
``hpo finalize`` before the summary was a model (tests/support/final_summaries: one per shape, an
ensemble at the fixed 0.5, --cv at out-of-fold thresholds, --refit train+val), read back and
written again byte for byte, and their cards rendered again word for word."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from hpo.final.model_card import model_card
from hpo.final.summary import FinalSummary
from tests.support import FINAL_SUMMARIES

SHAPES = ("ensemble", "cv", "refit")


@pytest.mark.parametrize("shape", SHAPES)
def test_a_real_metrics_json_round_trips_byte_for_byte(shape):
    text = (FINAL_SUMMARIES / shape / "metrics.json").read_text()
    summary = FinalSummary.read(FINAL_SUMMARIES / shape / "metrics.json")
    assert summary.to_json() == json.loads(text)
    # the same keys in the same order, numbers of the same JSON type (an int stays an int)
    assert json.dumps(summary.to_json(), indent=2, default=str) + "\n" == text


@pytest.mark.parametrize("shape", SHAPES)
def test_the_card_renders_from_the_model_as_it_did_from_the_dict(shape):
    summary = FinalSummary.read(FINAL_SUMMARIES / shape / "metrics.json")
    assert model_card(summary) == (FINAL_SUMMARIES / shape / "model_card.md").read_text()


def test_each_shape_holds_its_own_parts_and_omits_the_others():
    ensemble, cv, refit = (FinalSummary.read(FINAL_SUMMARIES / s / "metrics.json") for s in SHAPES)
    assert ensemble.ensemble and ensemble.chosen.seed is None and ensemble.cv is None
    assert "cv" not in ensemble.to_json() and "ensemble" not in cv.to_json()
    assert cv.rule == "out_of_fold" and cv.cv and cv.settings and cv.settings.cv == cv.cv.k
    assert refit.refit_on == "train+val" and refit.refit and refit.refit.epochs


def test_a_misspelt_part_is_refused_not_dropped():
    document = json.loads((FINAL_SUMMARIES / "refit" / "metrics.json").read_text())
    with pytest.raises(ValidationError, match="chosen.trail"):
        FinalSummary.model_validate({**document, "chosen": {**document["chosen"], "trail": 1}})


# a retraining's result.json and a reused checkpoint's, as finalize wrote them as dicts
RESULTS = {
    "retrained": {
        "run": "trial_3-seed_1",
        "rank": 1,
        "trial": 3,
        "seed": 1,
        "fold": None,
        "params": {"learning_rate": 0.0001, "batch_size": 16, "long_text": "head_tail"},
        "value": 0.6612,
        "best_epoch": 4,
        "metrics": {"post_macro_f1": 0.6612, "post_micro_f1": 0.7, "loss": 1},
        "wall_seconds": 812.4,
    },
    "reused": {
        "run": "trial_3-seed_0",
        "rank": 1,
        "trial": 3,
        "seed": 0,
        "fold": None,
        "params": {"learning_rate": 0.0001},
        "value": 0.65,
        "best_epoch": 3,
        "metrics": {"post_macro_f1": 0.65, "auroc": None},
        "wall_seconds": None,
        "reused_from_trial": 3,
    },
    "fold": {
        "run": "trial_3-seed_0-fold_1of2",
        "rank": 1,
        "trial": 3,
        "seed": 0,
        "fold": [2, 0],
        "params": {},
        "value": 0.6,
        "best_epoch": 2,
        "metrics": {"post_macro_f1": 0.6},
        "wall_seconds": 10.0,
    },
}


@pytest.mark.parametrize("kind", RESULTS)
def test_a_run_result_reads_and_writes_as_the_dict_it_was(kind):
    from hpo.final.summary import RunResult

    text = json.dumps(RESULTS[kind], indent=2) + "\n"
    result = RunResult.model_validate_json(text)
    assert json.dumps(result.model_dump(), indent=2) + "\n" == text
    assert result.seed_part().reused_from_trial == RESULTS[kind].get("reused_from_trial")
    older = {k: v for k, v in RESULTS[kind].items() if k != "fold"}  # before finalize --cv
    assert RunResult.model_validate(older).fold is None
    with pytest.raises(ValidationError):  # a misspelt key is refused, not dropped
        RunResult.model_validate({**RESULTS[kind], "vlaue": 1})
