"""evidence: every sentence of a post with each criterion it shows, counted by hand."""

from __future__ import annotations

import pytest

from hpo.data import load_descriptions, load_redsm5
from hpo.errors import DataError
from hpo.train.formulations import build_examples
from tests.support.redsm5_files import ANNOTATIONS, write_fixture


def test_evidence_examples_hand_counted(tmp_path):
    descriptions = load_descriptions()
    examples = build_examples(load_redsm5(write_fixture(tmp_path)), "evidence", descriptions)
    got = [(e.text_b, e.criterion, e.label) for e in examples]
    sleep, tired, grief = ANNOTATIONS[0][2], ANNOTATIONS[1][2], ANNOTATIONS[3][2]
    hopeless, no_fun = ANNOTATIONS[4][2], ANNOTATIONS[6][2]
    assert got == [
        # p1 annotates SLEEP_ISSUES and FATIGUE: every p1 sentence is paired with both.
        (sleep, "SLEEP_ISSUES", 1),
        (sleep, "FATIGUE", 0),  # negative: FATIGUE is annotated elsewhere in p1
        (tired, "SLEEP_ISSUES", 0),  # its own status-0 row
        (tired, "FATIGUE", 1),
        (grief, "SLEEP_ISSUES", 0),  # SPECIAL_CASE sentence gives negatives only
        (grief, "FATIGUE", 0),
        # p2: the DEPRESSED_MOOD 0 and 1 rows collapse into one positive.
        (hopeless, "DEPRESSED_MOOD", 1),
        (hopeless, "ANHEDONIA", 0),
        (no_fun, "DEPRESSED_MOOD", 0),
        (no_fun, "ANHEDONIA", 1),
    ]
    assert {e.post_id for e in examples} == {"p1", "p2"}  # p3 has no annotations
    assert examples[0].text_a == descriptions["SLEEP_ISSUES"]


def test_evidence_without_criterion_annotations_is_an_error(tmp_path):
    rows = [ANNOTATIONS[3]]  # only a SPECIAL_CASE row
    corpus = load_redsm5(write_fixture(tmp_path, annotations=rows))
    with pytest.raises(DataError, match="no examples for task 'evidence'"):
        build_examples(corpus, "evidence", load_descriptions())
