"""A split's unpadded token ids: an example's sequences, the model inputs they make, and the
disk cache written whole, read back checked, and moved aside when damaged."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hpo.data.tokenized import (
    DIGEST,
    TokenizedSplit,
    arrays_digest,
    discard_tokenized,
    load_tokenized,
    save_tokenized,
)


def two_examples(with_types: bool = True) -> TokenizedSplit:
    """Example 0 is one sequence; example 1, a long text, is two chunks."""
    ids = [np.array([0, 7, 8, 2]), np.array([0, 9, 2]), np.array([0, 10, 11, 12, 2])]
    return TokenizedSplit(
        input_ids=ids,
        token_type_ids=[np.zeros_like(s) for s in ids] if with_types else None,
        offsets=np.array([0, 1, 3]),
        labels=np.array([1, 0]),
        text_tokens=np.array([2, 6]),
        seen_tokens=np.array([2, 4]),
    )


def test_an_example_is_its_sequences_and_each_sequence_a_model_input():
    split = two_examples()
    assert len(split) == 2
    assert split.sequence_lengths.tolist() == [4, 3, 5] and split.lengths.tolist() == [4, 8]
    assert split.example_of_sequence().tolist() == [0, 1, 1]
    assert split.coverage == pytest.approx(6 / 8)
    features, counts = split.sequences([1])
    assert counts == [2] and [f["input_ids"].tolist() for f in features] == [
        [0, 9, 2],
        [0, 10, 11, 12, 2],
    ]
    assert set(features[0]) == {"input_ids", "attention_mask", "token_type_ids"}
    assert features[1]["attention_mask"].tolist() == [1] * 5
    assert "token_type_ids" not in two_examples(with_types=False).features([0])[0]


def test_the_cache_reads_back_what_was_saved(tmp_path):
    for with_types in (True, False):
        folder = tmp_path / f"split-{with_types}"
        split = two_examples(with_types)
        save_tokenized(folder, split)
        # written aside and renamed into place: nothing half-written is left
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        read = load_tokenized(folder, split.labels)
        assert [a.tolist() for a in read.input_ids] == [a.tolist() for a in split.input_ids]
        assert read.offsets.tolist() == [0, 1, 3] and read.seen_tokens.tolist() == [2, 4]
        assert (read.token_type_ids is None) == (not with_types)


def test_a_damaged_edited_or_planted_cache_is_refused(tmp_path):
    split = two_examples()
    folder = tmp_path / "split"
    save_tokenized(folder, split)
    with pytest.raises(ValueError, match="labels are not the labels"):
        load_tokenized(folder, 1 - split.labels)
    ids = np.load(folder / "input_ids.npy")
    np.save(folder / "input_ids.npy", ids[::-1].copy())
    with pytest.raises(ValueError, match="do not match their sha256.npy"):
        load_tokenized(folder, split.labels)
    (folder / f"{DIGEST}.npy").unlink()
    with pytest.raises(ValueError, match="no sha256.npy"):
        load_tokenized(folder, split.labels)
    planted = tmp_path / "planted"  # arrays that do not fit, their digest written again
    save_tokenized(planted, dataclasses.replace(split, offsets=np.array([0, 1, 2])))
    with pytest.raises(ValueError, match="arrays do not fit 2 examples"):
        load_tokenized(planted, split.labels)


def test_the_digest_covers_names_dtypes_shapes_and_bytes():
    base = {"a": np.arange(4, dtype=np.int64), "b": np.zeros(2)}
    digest = arrays_digest(base)
    assert digest == arrays_digest(dict(reversed(base.items())))  # in name order
    for changed in (
        {**base, "a": np.arange(4, dtype=np.int32)},
        {**base, "a": np.arange(4).reshape(2, 2)},
        {**base, "a": np.array([0, 1, 2, 4])},
        {"c": base["a"], "b": base["b"]},
    ):
        assert arrays_digest(changed) != digest


def test_a_discarded_cache_is_gone_and_discarding_it_again_is_nothing(tmp_path):
    folder = tmp_path / "split"
    save_tokenized(folder, two_examples())
    discard_tokenized(folder)
    assert list(tmp_path.iterdir()) == []
    discard_tokenized(folder)
