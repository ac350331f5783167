"""model_card.md as finalize renders it from its summary (tests/final/test_finalize.py renders real
ones): what the card says before any figure, and how it shows a figure that is not defined."""

from __future__ import annotations

import html
import re

from hpo.data import SYMPTOMS
from hpo.explain.report_header import notice
from hpo.final.model_card import INTENDED_USE, model_card
from hpo.final.summary import FinalSummary
from tests.support.helpers import final_summary

ROW = {"f1": 0.5, "precision": 0.5, "recall": 0.5, "tp": 1, "fp": 1, "fn": 1, "tn": 7, "support": 2}
REAL = final_summary("refit")
SUMMARY = FinalSummary.model_validate(
    final_summary(  # a real one, as an evidence study's: the parts the card shows changed
        "refit",
        study="evidence-demo",
        metric="macro_f1",
        split_sizes={**REAL["split_sizes"], "test": {"posts": 20, "examples": 297}},
        test={
            "metrics": {"macro_f1": 0.6156, "recall_at_1": 0.5},
            "intervals": {
                "macro_f1": {"low": 0.55, "high": 0.68, "posts": 20, "resamples": 2000, "seed": 0}
            },
            "thresholds": dict.fromkeys(SYMPTOMS, 0.5),
            # a symptom with no test sentence: nothing counted, no figure made up
            "per_symptom": dict.fromkeys(SYMPTOMS, ROW)
            | {
                "PSYCHOMOTOR": {
                    **dict.fromkeys(("f1", "precision", "recall")),
                    **dict.fromkeys(("tp", "fp", "fn", "tn", "support"), 0),
                }
            },
        },
        chosen={**REAL["chosen"], "validation": {}},
    )
)


def test_the_card_opens_with_the_intended_use_the_report_shows():
    card = model_card(SUMMARY)
    lines = card.splitlines()
    assert lines[2] == f"> **{INTENDED_USE[0]}** {INTENDED_USE[1]}"
    assert card.index("research screening aid") < card.index("Chosen:")
    # one text: the HTML report's notice says the same words
    text = html.unescape(re.sub(r"<[^>]+>", "", notice()))
    assert text == f"{INTENDED_USE[0]} {INTENDED_USE[1]}"


def test_a_symptom_without_test_examples_shows_dashes_not_a_made_up_f1():
    card = model_card(SUMMARY)
    assert "| PSYCHOMOTOR | 0 | 0.500 | — | — | — | 0 | 0 | 0 | 0 |" in card
    assert "| FATIGUE | 2 | 0.500 | 0.500 | 0.500 | 0.500 | 1 | 1 | 1 | 7 |" in card


def test_the_studys_metric_leads_the_test_table_with_its_interval_and_its_scope():
    card = model_card(SUMMARY)
    table = card[card.index("| metric | validation") :]
    assert table.splitlines()[2] == (
        "| **macro_f1** (the study's: it chose the model) |  | 0.6156 | 0.5500 – 0.6800 |"
    )
    assert "over the test split's 297 (sentence, symptom) pairs" in card
    assert "a post's sentences are drawn together" in card
