"""whole_post: one example per post, its sentences with the symptoms each is evidence for,
counted by hand (the command line end to end: tests/train/test_whole_post.py)."""

from __future__ import annotations

import numpy as np

from hpo.data import MULTILABEL, SYMPTOMS, load_descriptions, load_redsm5
from hpo.train.formulations import build_examples, formulation_of
from tests.support.redsm5_files import POSTS, write_fixture


def _symptoms(row) -> set[str]:
    return {symptom for symptom, flag in zip(SYMPTOMS, row, strict=True) if flag}


def test_each_post_is_its_sentences_each_with_the_symptoms_it_is_evidence_for(tmp_path):
    corpus = load_redsm5(write_fixture(tmp_path))
    examples = build_examples(corpus, "criteria", load_descriptions(), formulation="whole_post")
    assert [e.post_id for e in examples] == ["p1", "p2", "p3"]
    p1, p2, p3 = examples
    assert (p1.criterion, p1.text_a, p1.text_b) == (MULTILABEL, None, POSTS[0][1])
    assert p1.sentences == (
        "I can't sleep, at all.",
        'So "tired" every day.',
        "My doctor mentioned grief.",
    )
    # status 1 makes a sentence evidence; p1_1's SLEEP_ISSUES 0 and SPECIAL_CASE do not
    assert [_symptoms(row) for row in p1.evidence] == [{"SLEEP_ISSUES"}, {"FATIGUE"}, set()]
    assert _symptoms(p1.label) == {"SLEEP_ISSUES", "FATIGUE"}
    # the DEPRESSED_MOOD 0 and 1 rows on one sentence: evidence
    assert [_symptoms(row) for row in p2.evidence] == [{"DEPRESSED_MOOD"}, {"ANHEDONIA"}]
    assert p3.sentences == (POSTS[2][1],) and _symptoms(p3.label) == set()
    assert [_symptoms(row) for row in p3.evidence] == [set()]
    # its hard negatives: a status-0 row with no status-1 row of that symptom on the sentence
    assert [_symptoms(row) for row in p1.touched] == [set(), {"SLEEP_ISSUES"}, set()]
    assert [_symptoms(row) for row in p2.touched] == [set(), set()]
    assert [_symptoms(row) for row in p3.touched] == [set()]
    # the same post x symptom matrix as multilabel
    multilabel = build_examples(corpus, "criteria", load_descriptions(), formulation="multilabel")
    assert [e.label for e in examples] == [e.label for e in multilabel]


def test_its_sentence_evidence_is_one_array_per_post(tmp_path):
    corpus = load_redsm5(write_fixture(tmp_path))
    examples = build_examples(corpus, "criteria", load_descriptions(), formulation="whole_post")
    arrays = formulation_of("whole_post").sentence_evidence(examples)
    assert [a.shape for a in arrays] == [(3, len(SYMPTOMS)), (2, len(SYMPTOMS)), (1, 9)]
    assert all(a.dtype == np.int8 for a in arrays)
    assert [int(a.sum()) for a in arrays] == [2, 2, 0]
    touched = formulation_of("whole_post").sentence_evidence(examples, touched=True)
    assert [a.shape for a in touched] == [a.shape for a in arrays]
    assert [int(a.sum()) for a in touched] == [1, 0, 0]
