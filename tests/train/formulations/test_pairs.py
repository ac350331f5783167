"""criteria as pairs: one (description, post) example per symptom, counted by hand."""

from __future__ import annotations

from hpo.data import SYMPTOMS, load_descriptions, load_redsm5
from hpo.train.formulations import build_examples
from tests.support.redsm5_files import POSTS, write_fixture


def test_criteria_examples_hand_counted(tmp_path):
    descriptions = load_descriptions()
    examples = build_examples(load_redsm5(write_fixture(tmp_path)), "criteria", descriptions)
    assert len(examples) == 3 * 9
    positives = {(e.post_id, e.criterion) for e in examples if e.label == 1}
    # p1: SLEEP (p1_0 status 1; the status-0 row on p1_1 does not undo it), FATIGUE;
    # p2: DEPRESSED_MOOD (one of its two rows is 1), ANHEDONIA; SPECIAL_CASE is no criterion.
    assert positives == {
        ("p1", "SLEEP_ISSUES"),
        ("p1", "FATIGUE"),
        ("p2", "DEPRESSED_MOOD"),
        ("p2", "ANHEDONIA"),
    }
    first = examples[0]
    assert (first.post_id, first.criterion) == ("p1", SYMPTOMS[0])
    assert first.text_a == descriptions[SYMPTOMS[0]] and first.text_b == POSTS[0][1]
