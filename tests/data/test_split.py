"""Grouped splits: one post split serves both tasks, seeded, stratified by symptom; K folds."""

from __future__ import annotations

import pytest

from hpo.data import (
    SYMPTOMS,
    kfold_posts,
    load_descriptions,
    load_redsm5,
    partition,
    split_posts,
    symptom_profiles,
)
from hpo.errors import UsageError
from hpo.fixtures import write_sample
from hpo.train.formulations import build_examples
from hpo.vocabulary import TASKS
from tests.support.redsm5_files import write_fixture


@pytest.fixture(scope="module")
def sample_corpus(tmp_path_factory):
    return load_redsm5(write_sample(tmp_path_factory.mktemp("sample"), posts=200, seed=3))


def post_ids(examples) -> set[str]:
    return {e.post_id for e in examples}


def test_one_post_split_serves_both_tasks_grouped_complete_and_stratified(sample_corpus):
    profiles = symptom_profiles(sample_corpus)
    split = split_posts(profiles, seed=0)
    parts = (split.train, split.validation, split.test)
    assert sorted(p for part in parts for p in part) == sorted(sample_corpus.posts)
    assert [len(part) for part in parts] == [160, 20, 20]
    for task in TASKS:
        examples = build_examples(sample_corpus, task, load_descriptions())
        splits = partition(examples, split)
        for name, posts in zip(("train", "validation", "test"), parts, strict=True):
            assert post_ids(getattr(splits, name)) <= set(posts), (task, name)
        assert sum(len(part) for part in (splits.train, splits.validation, splits.test)) == len(
            examples
        )
    for symptom in SYMPTOMS:  # every split holds its share of every symptom's posts, within 2 posts
        overall = sum(symptom in shown for shown in profiles.values()) / len(profiles)
        for part in parts:
            assert sum(symptom in profiles[p] for p in part) == pytest.approx(
                overall * len(part), abs=2
            ), symptom


def test_splits_are_seeded(sample_corpus):
    profiles = symptom_profiles(sample_corpus)
    first, again, other = (split_posts(profiles, seed=s) for s in (7, 7, 8))
    assert first == again
    assert first.test != other.test


def test_every_requested_split_gets_a_post(tmp_path):
    profiles = symptom_profiles(load_redsm5(write_fixture(tmp_path)))
    split = split_posts(profiles, (0.8, 0.1, 0.1))
    assert [len(part) for part in (split.train, split.validation, split.test)] == [1, 1, 1]
    no_test = split_posts(profiles, (0.9, 0.1, 0.0))
    assert no_test.test == () and len(no_test.validation) == 1


def test_k_folds_hold_out_every_post_once(sample_corpus):
    profiles = symptom_profiles(sample_corpus)
    folds = kfold_posts(profiles, 5, seed=0)
    held = [p for _, out in folds for p in out]
    assert sorted(held) == sorted(profiles) and len(set(held)) == len(held)
    for kept, out in folds:
        assert not set(kept) & set(out) and len(out) == pytest.approx(40, abs=2)
    with pytest.raises(UsageError, match="2 <= K"):
        kfold_posts(profiles, 1)


@pytest.mark.parametrize(
    ("fractions", "expected"),
    [
        ((0.5, 0.3, 0.1), "sum to 1"),
        ((1.2, -0.1, -0.1), ">= 0"),
        ((0.0, 0.5, 0.5), "train fraction must be > 0"),
        ((0.5, 0.5), "three numbers"),
    ],
)
def test_bad_fractions(sample_corpus, fractions, expected):
    with pytest.raises(UsageError, match=expected):
        split_posts(symptom_profiles(sample_corpus), fractions)
