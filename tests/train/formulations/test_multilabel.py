"""criteria as one example per post, labelled with all nine symptoms at once."""

from __future__ import annotations

from hpo.data import MULTILABEL, SYMPTOMS, load_descriptions, load_redsm5
from hpo.train.formulations import build_examples
from tests.support.redsm5_files import write_fixture


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
