import numpy as np
import pytest
import torch

from hpo.data.collate import (
    Collator,
    coerce_long,
    length_grouped_batches,
    sorted_batches,
)

# --- coerce_long -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        [1, 0, 2],
        np.array([1, 0, 2], dtype=np.int32),
        np.array([1, 0, 2], dtype=np.uint8),
        np.array([1.0, 0.0, 2.0]),
        torch.tensor([1, 0, 2], dtype=torch.int16),
        torch.tensor([1.0, 0.0, 2.0], dtype=torch.bfloat16),
        [np.int64(1), 0.0, torch.tensor(2)],
    ],
)
def test_coerce_long_accepts_whole_numbers_of_any_type(value):
    result = coerce_long(value, "labels")
    assert result.dtype == torch.long
    assert result.tolist() == [1, 0, 2]


def test_coerce_long_scalars_and_bools():
    assert coerce_long(3, "x").item() == 3
    assert coerce_long(1.0, "x").item() == 1
    assert coerce_long(np.array([True, False]), "x").tolist() == [1, 0]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([0, 1, 1, 0.5], "labels must hold integers; got 0.5 at position 3"),
        (torch.tensor([[1.0, 2.0], [3.0, 2.5]]), r"got 2.5 at position \(1, 1\)"),
        (np.array([1.0, np.nan]), "got nan at position 1"),
        (0.5, "labels must hold integers; got 0.5$"),
        (["a", "b"], "labels must hold integers; got dtype <U1"),
        ([[1, 2], [3]], "labels must be a rectangular array"),
    ],
)
def test_coerce_long_names_the_field_and_the_bad_value(value, message):
    with pytest.raises(ValueError, match=message):
        coerce_long(value, "labels")


# --- Collator ----------------------------------------------------------------------------


def _features() -> list[dict]:
    return [
        {
            "input_ids": [5, 6, 7],
            "attention_mask": [1, 1, 1],
            "labels": 1,
            "idx": 0,
            "post_id": "a",
        },
        {
            "input_ids": np.array([5, 6], dtype=np.int32),
            "attention_mask": np.ones(2, dtype=np.int64),
            "labels": np.int64(0),
            "idx": 1,
            "post_id": "b",
        },
        {
            "input_ids": torch.tensor([5, 6, 7, 8, 9]),
            "attention_mask": torch.ones(5),
            "labels": 1.0,
            "idx": 2,
            "post_id": "c",
        },
    ]


def test_pads_to_the_longest_and_drops_unknown_keys():
    batch = Collator(pad_token_id=1)(_features())

    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert batch["input_ids"].tolist() == [[5, 6, 7, 1, 1], [5, 6, 1, 1, 1], [5, 6, 7, 8, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1] * 5]
    assert batch["labels"].tolist() == [1, 0, 1]
    assert all(t.dtype == torch.long for t in batch.values())


def test_pads_to_a_multiple_of_eight():
    batch = Collator(pad_token_id=0, pad_to_multiple_of=8)(_features())
    assert batch["input_ids"].shape == (3, 8)
    assert batch["attention_mask"][2].tolist() == [1] * 5 + [0] * 3


def test_keeps_only_what_the_model_takes_plus_labels():
    features = [dict(f, token_type_ids=[0] * len(f["input_ids"])) for f in _features()]
    batch = Collator(0, keep_keys={"input_ids", "attention_mask", "idx"})(features)

    assert set(batch) == {"input_ids", "attention_mask", "labels", "idx"}
    assert batch["idx"].tolist() == [0, 1, 2]

    with_types = Collator(0)(features)
    assert with_types["token_type_ids"].tolist() == [[0] * 5] * 3


def test_builds_the_attention_mask_when_missing():
    batch = Collator(0)([{"input_ids": [4, 4, 4], "labels": 0}, {"input_ids": [4], "labels": 1}])
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


def test_fractional_label_in_a_batch_is_named():
    features = _features()
    features[1]["labels"] = 0.5
    with pytest.raises(ValueError, match="labels must hold integers; got 0.5 at position 1"):
        Collator(0)(features)


def test_mask_length_must_match_input_ids():
    features = _features()
    features[0]["attention_mask"] = [1, 1]
    with pytest.raises(ValueError, match="attention_mask of example 0"):
        Collator(0)(features)


# --- batch plans -------------------------------------------------------------------------


def _skewed_lengths(n: int = 2000) -> np.ndarray:
    # Mostly short texts with a long tail, like posts of 2 to 7,000 words.
    return np.minimum(np.random.default_rng(0).lognormal(4.0, 1.0, size=n).astype(int) + 2, 512)


def _assert_each_index_once(batches, n):
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(n))


def _padded_tokens(lengths, batches, pad_to_multiple_of=None) -> tuple[int, int]:
    """(real tokens, tokens after padding) when the Collator pads each batch of a plan:
    their ratio is the padding waste."""
    collate = Collator(pad_token_id=0, pad_to_multiple_of=pad_to_multiple_of)
    real = padded = 0
    for batch in batches:
        inputs = collate([{"input_ids": [1] * int(lengths[i])} for i in batch])
        real += int(inputs["attention_mask"].sum())
        padded += inputs["input_ids"].numel()
    return real, padded


def test_length_grouped_batches_cover_every_index_once_and_repeat_per_seed():
    lengths = _skewed_lengths(1003)
    batches = length_grouped_batches(lengths, batch_size=16, seed=7, mega_batch_mult=10)

    _assert_each_index_once(batches, 1003)
    assert sorted(len(b) for b in batches)[0] == 1003 % 16
    assert all(len(b) == 16 for b in batches if len(b) != 1003 % 16)
    assert batches == length_grouped_batches(lengths, 16, seed=7, mega_batch_mult=10)
    assert batches != length_grouped_batches(lengths, 16, seed=8, mega_batch_mult=10)
    assert lengths.max() in lengths[batches[0]]  # OOM shows on the first step


def test_length_grouping_cuts_padding_against_random_batches():
    lengths = _skewed_lengths()
    order = np.random.default_rng(1).permutation(len(lengths))
    random_batches = [order[i : i + 16].tolist() for i in range(0, len(order), 16)]
    grouped = length_grouped_batches(lengths, batch_size=16, seed=1)

    real, random_padded = _padded_tokens(lengths, random_batches)
    _, grouped_padded = _padded_tokens(lengths, grouped)
    random_waste, grouped_waste = random_padded - real, grouped_padded - real
    assert grouped_waste * 10 < random_waste  # measured ratio ≈ 41


def test_sorted_batches_are_longest_first_and_cover_every_index():
    lengths = [3, 9, 1, 9, 4]
    batches = sorted_batches(lengths, batch_size=2)
    assert batches == [[1, 3], [4, 0], [2]]
    _assert_each_index_once(sorted_batches(_skewed_lengths(101), 8), 101)


def test_collator_pads_each_batch_to_its_longest_example_rounded_up():
    lengths = [3, 5, 2]
    assert _padded_tokens(lengths, [[0, 1], [2]]) == (10, 12)
    assert _padded_tokens(lengths, [[0, 1], [2]], pad_to_multiple_of=8) == (10, 24)


def test_batch_size_must_be_positive():
    with pytest.raises(ValueError, match="batch_size"):
        sorted_batches([1, 2], 0)
