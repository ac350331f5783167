"""whole_post's reading: every sentence of a post, packed whole into windows, each token tagged
with its sentence; cached like the other readings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hpo.data.collate import Collator
from hpo.data.tokenize import cache_info, chunks_per_text, clear_memory_cache
from hpo.data.windows import pack_windows, tokenize_posts
from tests.data.test_tokenize import _bert, _deberta_v2, _roberta, _sentences


@pytest.fixture(scope="module")
def tokenizers() -> dict:
    return {"roberta": _roberta(), "bert": _bert(), "deberta_v2": _deberta_v2()}


def test_sentences_are_packed_whole_and_in_order_and_only_an_overlong_one_is_cut():
    windows = pack_windows([[1, 2, 3], [4, 5], [6, 7, 8, 9, 10, 11, 12], [13]], budget=4)
    assert windows == [
        ([1, 2, 3], [0, 0, 0]),  # sentence 1 would not fit beside it
        ([4, 5], [1, 1]),
        ([6, 7, 8, 9], [2, 2, 2, 2]),  # longer than a window: cut
        ([10, 11, 12, 13], [2, 2, 2, 3]),  # its last piece starts the next fill
    ]
    assert pack_windows([], budget=4) == [([], [])]


@pytest.mark.parametrize("name", ["roberta", "bert", "deberta_v2"])
def test_every_token_of_every_sentence_is_read_once_with_its_sentence(tokenizers, name):
    tokenizer = tokenizers[name]
    posts = [tuple(_sentences(n, seed=n, max_words=25)) for n in (1, 4, 30)]
    split = tokenize_posts(tokenizer, posts, np.zeros((3, 9), np.int64), 48, cache_key=None)
    assert split.coverage == 1.0 and split.segments is not None
    for post, sentences in enumerate(posts):
        windows = range(split.offsets[post], split.offsets[post + 1])
        ids = np.concatenate([split.input_ids[j][split.segments[j] >= 0] for j in windows])
        owners = np.concatenate([split.segments[j][split.segments[j] >= 0] for j in windows])
        assert all(len(split.input_ids[j]) <= 48 for j in windows)
        assert (np.diff(owners) >= 0).all() and set(owners) == set(range(len(sentences)))
        for index, sentence in enumerate(sentences):  # the sentence's own tokens, in order
            text = sentence if index == 0 else " " + sentence
            expected = tokenizer(text, add_special_tokens=False)["input_ids"]
            assert ids[owners == index].tolist() == expected
    budget = 48 - tokenizer.num_special_tokens_to_add(pair=False)
    assert (np.diff(split.offsets) <= chunks_per_text(split.text_tokens, budget)).all()


def test_a_sequence_numbers_its_own_sentences_from_zero_and_padding_is_no_sentence(tokenizers):
    posts = [tuple(_sentences(12, seed=5, max_words=12))]
    split = tokenize_posts(tokenizers["bert"], posts, np.zeros((1, 9), np.int64), 32, None)
    assert split.offsets[-1] > 1
    features = split.features(range(split.offsets[-1]))
    batch = Collator(0, keep_keys={"input_ids", "attention_mask", "sentence_index"})(features)
    index = batch["sentence_index"]
    assert (index.max(dim=1).values + 1).tolist() == split.sentences_per_sequence.tolist()
    assert ((index == -1) == (batch["attention_mask"] == 0) | _specials(batch, index)).all()
    examples, sentences = split.sentence_rows(range(split.offsets[-1]))
    assert examples.tolist() == [0] * len(examples)
    assert sorted(set(sentences.tolist())) == list(range(12))


def _specials(batch, index):
    """The first and last real token of each row: [CLS] and [SEP]."""
    lengths = batch["attention_mask"].sum(dim=1)
    marked = torch.zeros(index.shape, dtype=torch.bool)
    marked[:, 0] = True
    marked[torch.arange(len(lengths)), lengths - 1] = True
    return marked


def test_posts_are_cached_on_disk_and_in_memory_like_pairs(tokenizers, tmp_path):
    clear_memory_cache()
    posts = [tuple(_sentences(6, seed=seed)) for seed in range(4)]
    labels = np.zeros((4, 9), np.int64)
    first = tokenize_posts(tokenizers["roberta"], posts, labels, 40, "train", tmp_path)
    before = cache_info()
    again = tokenize_posts(tokenizers["roberta"], posts, labels, 40, "train", tmp_path)
    assert again is first and cache_info().memory_hits == before.memory_hits + 1
    clear_memory_cache()  # a fresh worker: read from disk, no tokenizer run
    from_disk = tokenize_posts(tokenizers["roberta"], posts, labels, 40, "train", tmp_path)
    assert cache_info().tokenizations == before.tokenizations
    for a, b in zip(first.segments, from_disk.segments, strict=True):
        assert (a == b).all()
