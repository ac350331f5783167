"""The synthetic generator: exact ReDSM5 layout, reproducible, and covering the awkward cases."""

from __future__ import annotations

import csv
import hashlib

import pytest

from hpo.data import (
    SPECIAL_CASE,
    SYMPTOMS,
    TASKS,
    build_examples,
    load_descriptions,
    load_redsm5,
)
from hpo.errors import UsageError
from hpo.fixtures import corpus_sentences, write_sample
from hpo.fixtures.templates import NEUTRAL, PRESENT

FILES = ("redsm5_posts.csv", "redsm5_annotations.csv")


def read_rows(path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory):
    return write_sample(tmp_path_factory.mktemp("sample") / "nested" / "dir", posts=200, seed=0)


# sha256 of the files the short profile wrote for posts=200, seed=0 before the realistic
# profile existed. Fast end-to-end tests rely on this exact data: change it on purpose only.
SHORT_SHA256 = {
    "redsm5_posts.csv": "cbf8a88637c851654abe8d828b17ff36cb45f66ec34b989a8e5fa9e37e65676e",
    "redsm5_annotations.csv": "98be469700afff0d1d9a1993104b6cb851d6ed5e30b490cb06bb1fa38b1c4416",
}


def test_short_profile_output_is_pinned(sample_dir):
    for name, digest in SHORT_SHA256.items():
        assert hashlib.sha256((sample_dir / name).read_bytes()).hexdigest() == digest, name


def test_exact_headers(sample_dir):
    posts_header = (sample_dir / FILES[0]).read_text(encoding="utf-8").split("\n", 1)[0]
    annotations_header = (sample_dir / FILES[1]).read_text(encoding="utf-8").split("\n", 1)[0]
    assert posts_header == "post_id,text"
    assert annotations_header == "post_id,sentence_id,sentence_text,DSM5_symptom,status,explanation"


def test_same_seed_is_byte_identical_and_another_seed_differs(sample_dir, tmp_path):
    again = write_sample(tmp_path / "again", posts=200, seed=0)
    other = write_sample(tmp_path / "other", posts=200, seed=1)
    for name in FILES:
        assert (again / name).read_bytes() == (sample_dir / name).read_bytes()
        assert (other / name).read_bytes() != (sample_dir / name).read_bytes()


def test_covers_the_awkward_cases(sample_dir):
    posts = read_rows(sample_dir / FILES[0])
    annotations = read_rows(sample_dir / FILES[1])
    texts = [row["text"] for row in posts]
    assert len(posts) == 200
    assert posts[0]["post_id"] == "s_00001"
    assert any("\n" in text for text in texts)
    assert any(len(text.split()) < 10 for text in texts)
    assert any(len(text) > 2500 for text in texts)
    assert any(row["status"] == "0" for row in annotations)
    assert any(row["DSM5_symptom"] == SPECIAL_CASE for row in annotations)
    assert {row["DSM5_symptom"] for row in annotations} == {*SYMPTOMS, SPECIAL_CASE}
    by_id = {row["post_id"]: row["text"] for row in posts}
    for row in annotations:
        assert row["sentence_text"] in by_id[row["post_id"]]
        assert row["sentence_id"].startswith(row["post_id"] + "_")


def test_corpus_sentences_cover_templates_fills_and_descriptions():
    sentences = corpus_sentences()
    assert len(sentences) == len(set(sentences)) > 200
    assert "I sleep fine most nights honestly." in sentences
    assert any("5am" in sentence for sentence in sentences)  # every fill word appears
    assert all(description in sentences for description in load_descriptions().values())


def test_each_symptom_has_words_no_other_template_uses():
    def words(templates) -> set[str]:
        return {word.strip(".,'").lower() for template in templates for word in template.split()}

    for symptom in SYMPTOMS:
        others = [t for s, group in PRESENT.items() if s != symptom for t in group]
        assert words(PRESENT[symptom]) - words(others) - words(NEUTRAL), symptom


def test_typos_change_only_labels(sample_dir, tmp_path):
    typo_dir = write_sample(tmp_path, posts=200, seed=0, typos=True)
    clean, typo = read_rows(sample_dir / FILES[1]), read_rows(typo_dir / FILES[1])
    assert [row["sentence_text"] for row in clean] == [row["sentence_text"] for row in typo]
    labels = {row["DSM5_symptom"] for row in typo}
    assert "LEEP_ISSUES" in labels and any(label.islower() for label in labels)
    loaded = load_redsm5(typo_dir)
    assert [a.symptom for a in loaded.annotations] == [row["DSM5_symptom"] for row in clean]


@pytest.mark.parametrize("task", TASKS)
def test_round_trip_through_loader_and_tasks(sample_dir, task):
    corpus = load_redsm5(sample_dir)
    assert len(corpus.posts) == 200
    examples = build_examples(corpus, task, load_descriptions())
    labels = {e.label for e in examples}
    assert labels == {0, 1}
    if task == "criteria":
        assert len(examples) == 200 * 9


def test_tiny_sample_still_loads(tmp_path):
    corpus = load_redsm5(write_sample(tmp_path, posts=1, seed=5))
    assert list(corpus.posts) == ["s_00001"]


def test_posts_must_be_positive(tmp_path):
    with pytest.raises(UsageError, match="posts must be >= 1"):
        write_sample(tmp_path, posts=0)
