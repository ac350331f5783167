"""criteria as one example per post, labelled with all nine symptoms at once."""

from __future__ import annotations

from hpo.data import MULTILABEL, SYMPTOMS, load_descriptions, load_redsm5
from hpo.train.formulations import build_examples
from tests.support.redsm5_files import ANNOTATIONS, write_fixture


def test_multilabel_criteria_describe_the_same_matrix_as_pairs(tmp_path):
    corpus = load_redsm5(write_fixture(tmp_path))
    pairs = build_examples(corpus, "criteria", load_descriptions())
    posts = build_examples(corpus, "criteria", load_descriptions(), formulation="multilabel")
    assert [e.post_id for e in posts] == ["p1", "p2", "p3"]
    assert all(e.criterion == MULTILABEL and e.text_a is None for e in posts)
    from_pairs = {(e.post_id, e.criterion): e.label for e in pairs}
    for post in posts:
        assert post.label == tuple(from_pairs[(post.post_id, s)] for s in SYMPTOMS)
        assert post.text_b == corpus.posts[post.post_id].text


def test_a_symptom_touched_but_not_shown_is_a_hard_negative_in_every_criteria_formulation(tmp_path):
    """p3's APPETITE_CHANGE has a status-0 row alone: a hard negative. p1's SLEEP_ISSUES has a
    status-0 row beside a status-1 one: shown, so not a hard negative."""
    extra = ["p3", "p3_0", "Just a normal day at work.", "APPETITE_CHANGE", "0", "not appetite"]
    corpus = load_redsm5(write_fixture(tmp_path, annotations=[*ANNOTATIONS, extra]))
    posts = build_examples(corpus, "criteria", load_descriptions(), formulation="multilabel")
    pairs = build_examples(corpus, "criteria", load_descriptions())
    hard = {
        (post.post_id, symptom)
        for post in posts
        for symptom, flag in zip(SYMPTOMS, post.hard_negative, strict=True)
        if flag
    }
    assert hard == {("p3", "APPETITE_CHANGE")}
    assert {(e.post_id, e.criterion) for e in pairs if e.hard_negative} == hard
    assert all(not e.label for e in pairs if e.hard_negative)
    whole = build_examples(corpus, "criteria", load_descriptions(), formulation="whole_post")
    assert [e.hard_negative for e in whole] == [e.hard_negative for e in posts]
