"""Augmentation edits training texts only, the same way for the same seed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hpo.data import Example
from hpo.data.augment import augment_examples
from hpo.fixtures import write_sample
from hpo.train.config import TrainConfig
from hpo.train.prepare import prepare_data

POST = "i have not slept properly in weeks and nothing feels worth doing any more at all"


def _examples(n: int = 20) -> list[Example]:
    return [
        Example(f"p{i}", "SLEEP_ISSUES", "Insomnia or hypersomnia.", f"{POST} {i}", 1)
        for i in range(n)
    ]


@pytest.mark.parametrize("method", ["word_dropout", "word_swap"])
def test_augmentation_is_deterministic_per_seed_and_edits_only_the_post(method):
    examples = _examples()
    once, twice = (augment_examples(examples, method, 0.3, seed=7) for _ in range(2))
    assert once == twice
    assert once != augment_examples(examples, method, 0.3, seed=8)
    assert any(a.text_b != e.text_b for a, e in zip(once, examples, strict=True))
    for augmented, original in zip(once, examples, strict=True):
        assert (augmented.text_a, augmented.label, augmented.post_id) == (
            original.text_a,
            original.label,
            original.post_id,
        )
        if method == "word_swap":  # the same words, reordered
            assert sorted(augmented.text_b.split()) == sorted(original.text_b.split())
        else:  # a subsequence of the words, never empty
            words = iter(original.text_b.split())
            assert augmented.text_b and all(word in words for word in augmented.text_b.split())


def test_rate_zero_and_none_leave_texts_alone():
    examples = _examples(3)
    assert augment_examples(examples, "none", 0.5, seed=0) == examples
    assert augment_examples(examples, "word_dropout", 0.0, seed=0) == examples
    with pytest.raises(ValueError, match="augmentation must be one of"):
        augment_examples(examples, "back_translation", 0.1, seed=0)


def test_augmentation_never_touches_validation_or_test(tiny_roberta, tmp_path):
    sample_dir = write_sample(tmp_path, posts=80, seed=5)
    plain = TrainConfig(
        task="criteria", encoder=str(tiny_roberta), data_dir=str(sample_dir), max_length=64
    )
    augmented = prepare_data(
        dataclasses.replace(plain, augmentation="word_dropout", augmentation_rate=0.3)
    )
    original = prepare_data(plain)
    for name in ("validation", "test"):
        assert [ids.tolist() for ids in getattr(augmented, name).tokens.input_ids] == [
            ids.tolist() for ids in getattr(original, name).tokens.input_ids
        ], name
    assert augmented.train.tokens.lengths.sum() < original.train.tokens.lengths.sum(), (
        "training texts were edited"
    )
    assert np.array_equal(augmented.train.tokens.labels, original.train.tokens.labels)
