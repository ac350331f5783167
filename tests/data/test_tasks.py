"""The criteria descriptions (packaged or the user's) and the evidence candidates: every
sentence of a post, paired with the criteria in scope, and the annotations that do not align."""

from __future__ import annotations

import pytest

from hpo.data import SYMPTOMS, evidence_candidates, load_descriptions, load_redsm5
from hpo.data.sentences import NOT_IN_POST, split_sentences
from hpo.errors import DataError
from tests.support.redsm5_files import write_fixture


def test_packaged_descriptions_cover_the_nine():
    descriptions = load_descriptions()
    assert list(descriptions) == list(SYMPTOMS)
    assert all(text.endswith(".") for text in descriptions.values())


def test_user_descriptions_replace_packaged(tmp_path):
    path = tmp_path / "criteria.yaml"
    path.write_text("".join(f"{s.lower()}: Custom {s}.\n" for s in SYMPTOMS))
    assert load_descriptions(path)["SLEEP_ISSUES"] == "Custom SLEEP_ISSUES."


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("DEPRESSED_MOOD: sad\n", "no description for ANHEDONIA"),
        (
            "".join(f"{s}: x\n" for s in SYMPTOMS) + "SPECIAL_CASE: y\n",
            r"unknown symptom key\(s\) SPECIAL_CASE",
        ),
        ("- a list\n", "expected a mapping"),
        ("DEPRESSED_MOOD: [unclosed\n", "invalid YAML"),
    ],
)
def test_bad_user_descriptions(tmp_path, content, expected):
    path = tmp_path / "criteria.yaml"
    path.write_text(content)
    with pytest.raises(DataError, match=expected):
        load_descriptions(path)


def test_evidence_covers_every_sentence_and_reports_what_does_not_align(tmp_path):
    posts = [
        ["p1", "I sleep badly. The weather was nice. I feel   worthless\nevery day. We had pizza."],
        ["p2", "Nothing here."],
    ]
    annotations = [
        ["p1", "p1_0", "I sleep badly.", "SLEEP_ISSUES", "1", ""],
        [
            "p1",
            "p1_2",
            "I feel worthless every day.",
            "WORTHLESSNESS",
            "1",
            "",
        ],  # aligns up to whitespace
        ["p1", "p1_9", "A sentence the post never had.", "WORTHLESSNESS", "1", ""],
        ["p1", "p1_3", "We had pizza.", "FATIGUE", "0", ""],  # a hard negative; FATIGUE not shown
    ]
    corpus = load_redsm5(write_fixture(tmp_path, posts=posts, annotations=annotations))
    examples, alignment = evidence_candidates(corpus, load_descriptions())
    sentences = [s.text for s in split_sentences(posts[0][1])]
    assert sentences == [
        "I sleep badly.",
        "The weather was nice.",
        "I feel   worthless",
        "every day.",
        "We had pizza.",
    ]
    got = {(e.text_b, e.criterion): (e.label, e.annotated) for e in examples}
    assert set(got) == {
        (s, c) for s in sentences for c in ("SLEEP_ISSUES", "WORTHLESSNESS")
    }  # p2 shows nothing
    assert got[("I sleep badly.", "SLEEP_ISSUES")] == (1, True)
    assert got[("I sleep badly.", "WORTHLESSNESS")] == (0, True)  # hard negative
    assert got[("I feel   worthless", "WORTHLESSNESS")] == (
        1,
        True,
    )  # the annotation spans a line break
    assert got[("every day.", "WORTHLESSNESS")] == (1, True)
    assert got[("The weather was nice.", "SLEEP_ISSUES")] == (0, False)  # nobody annotated it
    assert got[("We had pizza.", "SLEEP_ISSUES")] == (0, True)
    assert alignment.unaligned == (("p1", "p1_9", NOT_IN_POST),)
    assert "3 of 4 annotation rows aligned" in alignment.summary() and "p1_9" in alignment.summary()

    everything, _ = evidence_candidates(corpus, load_descriptions(), scope="all_criteria")
    assert len(everything) == (len(sentences) + 1) * len(SYMPTOMS)
