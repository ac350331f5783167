"""A post's sentences as character spans of its text, an annotated sentence found in its post
(verbatim or up to whitespace), and the sentences an annotated span covers."""

from __future__ import annotations

import numpy as np
import pytest

from hpo.data import sentences as module
from hpo.data.sentences import Sentence, covered, locate, presplit, split_sentences

POST = "I sleep badly. The weather was nice!\n\nI feel   worthless\nevery day. We had pizza?"


def test_every_sentence_is_a_stripped_span_of_the_post_in_order():
    sentences = split_sentences(POST)
    assert [s.text for s in sentences] == [
        "I sleep badly.",
        "The weather was nice!",
        "I feel   worthless",  # a line break ends a sentence
        "every day.",
        "We had pizza?",
    ]
    assert all(POST[s.start : s.end] == s.text for s in sentences)
    assert [s.start for s in sentences] == sorted(s.start for s in sentences)


def test_a_blank_post_has_no_sentences_and_a_repeated_sentence_gets_its_own_span():
    assert split_sentences("  \n\n ") == []
    twice = split_sentences("Same again. Same again.")
    assert [(s.start, s.end) for s in twice] == [(0, 11), (12, 23)]


def test_an_annotated_sentence_is_found_verbatim_or_up_to_whitespace():
    assert locate(POST, "I sleep badly.") == (0, 14)
    assert locate(POST, "  We had pizza?  ") == (POST.index("We"), len(POST))
    start, end = locate(POST, "I feel worthless every day.")
    assert POST[start:end] == "I feel   worthless\nevery day."
    assert locate(POST, "A sentence the post never had.") is None
    assert locate(POST, "   ") is None


def test_a_span_covers_a_sentence_when_half_of_either_lies_in_the_other():
    sentences = [Sentence(0, 10, "a" * 10), Sentence(11, 31, "b" * 20), Sentence(32, 40, "c" * 8)]
    assert covered(sentences, (0, 10)) == [0]
    assert covered(sentences, (0, 31)) == [0, 1]
    assert covered(sentences, (5, 12)) == [0]  # half of the first, one character of the second
    assert covered(sentences, (15, 20)) == [1]  # all of the span lies in the sentence
    assert covered(sentences, (28, 36)) == [2]  # half of the last, 3 of the second's 20
    assert covered(sentences, (10, 11)) == []  # the space between them


POSTS = [POST, "One more post. It has two sentences.", "  \n "]


@pytest.fixture
def fresh(monkeypatch):
    """This process as a new worker's: nothing split yet, in memory."""
    split = module._split
    monkeypatch.setattr(module, "_PRESPLIT", {})
    split.cache_clear()
    yield
    split.cache_clear()


def _no_splitting(monkeypatch):
    def refuse(text):
        raise AssertionError(f"split again: {text!r}")

    monkeypatch.setattr(module, "_split", refuse)


def test_posts_split_once_are_read_back_by_a_later_process_without_splitting(
    tmp_path, fresh, monkeypatch
):
    expected = [split_sentences(post) for post in POSTS]
    module._split.cache_clear()
    presplit(POSTS, tmp_path)
    [cached] = tmp_path.glob("sentences-*.npy")
    monkeypatch.setattr(module, "_PRESPLIT", {})  # the later process
    _no_splitting(monkeypatch)
    presplit(POSTS, tmp_path)
    assert [split_sentences(post) for post in POSTS] == expected
    assert list(tmp_path.glob("sentences-*.npy")) == [cached]


@pytest.mark.parametrize(
    "damage",
    [
        lambda rows: rows[:, [0, 2, 1]],  # end before start
        lambda rows: rows + np.array([0, 0, 10_000]),  # past its text's end
        lambda rows: rows[::-1],  # out of order
        lambda rows: rows - np.array([0, 1, 0]),  # a span that takes in a space
        lambda rows: rows.astype(np.float64),
        lambda rows: np.array([[len(POSTS), 0, 1]]),  # a text there is not
    ],
)
def test_a_damaged_or_planted_cache_is_split_again_and_replaced(tmp_path, fresh, damage):
    expected = [split_sentences(post) for post in POSTS]
    presplit(POSTS, tmp_path)
    [cached] = tmp_path.glob("sentences-*.npy")
    np.save(cached, damage(np.load(cached)), allow_pickle=False)
    module._PRESPLIT.clear()
    presplit(POSTS, tmp_path)
    assert [split_sentences(post) for post in POSTS] == expected
    assert module._read_spans(cached, POSTS) is not None  # written again, whole


def test_a_file_that_is_no_array_is_split_again(tmp_path, fresh):
    presplit(POSTS, tmp_path)
    [cached] = tmp_path.glob("sentences-*.npy")
    cached.write_bytes(b"not numpy")
    module._PRESPLIT.clear()
    presplit(POSTS, tmp_path)
    assert split_sentences(POSTS[1]) == [
        Sentence(0, 14, "One more post."),
        Sentence(15, 36, "It has two sentences."),
    ]
