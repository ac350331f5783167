import dataclasses
import random
import shutil

import numpy as np
import pytest
from tokenizers import ByteLevelBPETokenizer
from transformers import BertTokenizerFast, DebertaV2Tokenizer, RobertaTokenizerFast

from hpo.data.collate import Collator
from hpo.data.tokenize import (
    cache_info,
    clear_memory_cache,
    tokenize_pairs,
    tokenizer_fingerprint,
)
from hpo.data.tokenized import save_tokenized
from hpo.errors import DataError, UsageError

WORDS = (
    "i feel sad tired sleep appetite worthless focus hopeless cannot enjoy anything always "
    "low energy night day food weight think die nothing matters empty guilty slow restless"
).split()
CRITERIA = ["depressed mood most of the day", "loss of interest or pleasure", "insomnia"]


def _sentences(n: int, seed: int, max_words: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(2, max_words))) for _ in range(n)]


def _roberta(vocab_size: int = 400) -> RobertaTokenizerFast:
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        _sentences(300, seed=1) + CRITERIA,
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    return RobertaTokenizerFast(tokenizer_object=bpe._tokenizer)


def _bert() -> BertTokenizerFast:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = sorted({w for text in CRITERIA for w in text.split()} | set(WORDS))
    return BertTokenizerFast(vocab={w: i for i, w in enumerate(specials + words)})


def _deberta_v2() -> DebertaV2Tokenizer:
    specials = [(t, 0.0) for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]]
    words = sorted({w for text in CRITERIA for w in text.split()} | set(WORDS))
    pieces = [("▁" + w, -1.0) for w in words] + [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyz▁"]
    return DebertaV2Tokenizer(vocab=specials + pieces)


@pytest.fixture(scope="session")
def tokenizers() -> dict:
    return {"roberta": _roberta(), "bert": _bert(), "deberta_v2": _deberta_v2()}


@pytest.fixture(scope="session")
def data() -> tuple[list[tuple[str, str]], list[int]]:
    posts = _sentences(60, seed=2, max_words=120)
    pairs = [(criterion, post) for post in posts for criterion in CRITERIA]
    labels = [i % 2 for i in range(len(pairs))]
    return pairs, labels


@pytest.fixture(autouse=True)
def _fresh_memory_cache():
    clear_memory_cache()
    yield
    clear_memory_cache()


@pytest.mark.parametrize("name", ["roberta", "bert", "deberta_v2"])
def test_truncates_only_the_post(tokenizers, data, name):
    tokenizer = tokenizers[name]
    pairs, labels = data
    split = tokenize_pairs(tokenizer, pairs, labels, max_length=32, cache_key=f"trunc-{name}")

    assert len(split) == len(pairs)
    assert split.lengths.max() == 32 and split.lengths.min() < 32  # some cut, some not
    for (criterion, _), ids, length in zip(pairs, split.input_ids, split.lengths, strict=True):
        criterion_ids = tokenizer(criterion, add_special_tokens=False)["input_ids"]
        assert ids[1 : 1 + len(criterion_ids)].tolist() == criterion_ids
        assert len(ids) == length
        assert ids[-1] == tokenizer.sep_token_id
    np.testing.assert_array_equal(split.labels, labels)
    assert split.labels.dtype == np.int64


def test_token_type_ids_only_where_the_tokenizer_makes_them(tokenizers, data):
    pairs, labels = data
    for name, expected in [("roberta", False), ("bert", True), ("deberta_v2", True)]:
        split = tokenize_pairs(tokenizers[name], pairs, labels, 32, cache_key=f"types-{name}")
        assert (split.token_type_ids is not None) is expected, name
        if expected:  # the post segment is type 1
            assert {int(t) for t in split.token_type_ids[0]} == {0, 1}


def test_criterion_longer_than_max_length_asks_to_raise_it(tokenizers):
    pairs = [("depressed mood most of the day", "i feel sad")]
    with pytest.raises(UsageError, match="Raise max_length to at least"):
        tokenize_pairs(tokenizers["bert"], pairs, [1], max_length=8, cache_key="too-short")


def test_second_call_does_no_work_and_returns_the_same_data(tokenizers, data):
    pairs, labels = data
    first = tokenize_pairs(tokenizers["roberta"], pairs, labels, 32, cache_key="train")
    before = cache_info()
    second = tokenize_pairs(tokenizers["roberta"], pairs, labels, 32, cache_key="train")

    assert second is first
    assert cache_info().tokenizations == before.tokenizations
    assert cache_info().memory_hits == before.memory_hits + 1


def test_no_cache_key_caches_nothing(tokenizers, data, tmp_path):
    """Prediction tokenizes each text once: keeping it would grow the process without end."""
    pairs, labels = data
    cached = tokenize_pairs(tokenizers["roberta"], pairs, labels, 32, cache_key="train")
    before = cache_info()
    first = tokenize_pairs(
        tokenizers["roberta"], pairs, labels, 32, cache_key=None, cache_dir=tmp_path
    )
    second = tokenize_pairs(
        tokenizers["roberta"], pairs, labels, 32, cache_key=None, cache_dir=tmp_path
    )

    assert second is not first and cache_info().tokenizations == before.tokenizations + 2
    assert cache_info().memory_misses == before.memory_misses and not list(tmp_path.iterdir())
    assert all((a == b).all() for a, b in zip(first.input_ids, cached.input_ids, strict=True))


def test_other_max_length_or_tokenizer_tokenizes_again(tokenizers, data):
    pairs, labels = data
    tokenize_pairs(tokenizers["roberta"], pairs, labels, 32, cache_key="train")
    before = cache_info().tokenizations
    longer = tokenize_pairs(tokenizers["roberta"], pairs, labels, 64, cache_key="train")
    other = tokenize_pairs(tokenizers["bert"], pairs, labels, 32, cache_key="train")

    assert cache_info().tokenizations == before + 2
    assert longer.lengths.max() > 32
    assert other.token_type_ids is not None


@pytest.mark.parametrize("long_text", ["truncate", "chunks"])
def test_disk_cache_serves_a_new_process_after_memory_is_cleared(
    tokenizers, data, tmp_path, long_text
):
    pairs, labels = data
    first = tokenize_pairs(
        tokenizers["bert"], pairs, labels, 32, "train", cache_dir=tmp_path, long_text=long_text
    )
    clear_memory_cache()  # what a fresh worker process starts with
    before = cache_info().tokenizations
    again = tokenize_pairs(
        tokenizers["bert"], pairs, labels, 32, "train", cache_dir=tmp_path, long_text=long_text
    )

    assert cache_info().tokenizations == before
    assert again is not first
    for a, b in zip(
        first.input_ids + first.token_type_ids, again.input_ids + again.token_type_ids, strict=True
    ):
        np.testing.assert_array_equal(a, b)
    for name in ("lengths", "offsets", "labels", "text_tokens", "seen_tokens"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))


def test_disk_cache_holds_plain_arrays_only(tokenizers, data, tmp_path):
    """Workers read a possibly shared cache directory: nothing in it may be unpickled."""
    pairs, labels = data
    tokenize_pairs(tokenizers["roberta"], pairs, labels, 32, "plain", cache_dir=tmp_path)
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert files and all(f.suffix == ".npy" for f in files), files
    for f in files:
        np.load(f, allow_pickle=False)  # raises on any object (pickled) array


@pytest.mark.parametrize("damage", ["truncate", "empty", "delete-offsets", "short-ids"])
def test_a_damaged_disk_cache_is_rebuilt_once_with_a_warning(
    tokenizers, data, tmp_path, caplog, damage
):
    pairs, labels = data
    first = tokenize_pairs(tokenizers["roberta"], pairs, labels, 32, "damaged", cache_dir=tmp_path)
    folder = next(p for p in tmp_path.iterdir() if p.is_dir())
    if damage == "truncate":
        path = folder / "input_ids.npy"
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "empty":
        (folder / "labels.npy").write_bytes(b"")
    elif damage == "delete-offsets":
        (folder / "offsets.npy").unlink()
    else:  # a valid file with the wrong contents: fewer ids than the offsets promise
        np.save(
            folder / "input_ids.npy", np.load(folder / "input_ids.npy")[:-3], allow_pickle=False
        )
    clear_memory_cache()
    before = cache_info().tokenizations
    with caplog.at_level("WARNING", logger="hpo.data.tokenize"):
        again = tokenize_pairs(
            tokenizers["roberta"], pairs, labels, 32, "damaged", cache_dir=tmp_path
        )
    assert cache_info().tokenizations == before + 1
    assert [
        r.message for r in caplog.records if "damaged" in r.message and "rebuilding" in r.message
    ]
    assert all(np.array_equal(a, b) for a, b in zip(first.input_ids, again.input_ids, strict=True))
    clear_memory_cache()
    tokenize_pairs(tokenizers["roberta"], pairs, labels, 32, "damaged", cache_dir=tmp_path)
    assert cache_info().tokenizations == before + 1, "the rebuilt cache serves the next process"


@pytest.mark.parametrize("plant", ["flipped-labels-resealed", "edited-ids-unsealed"])
def test_a_planted_or_edited_disk_cache_is_never_trained_on(
    tokenizers, data, tmp_path, caplog, plant
):
    """Issue #55 item 3: a cache folder at the data's own key whose labels were flipped (and
    its digest written again, as a planter can) or whose ids were edited is rebuilt, with a
    warning, from the data; what comes back holds the data's labels and ids."""
    pairs, labels = data
    first = tokenize_pairs(tokenizers["roberta"], pairs, labels, 32, "planted", cache_dir=tmp_path)
    folder = next(p for p in tmp_path.iterdir() if p.is_dir())
    if plant == "flipped-labels-resealed":
        shutil.rmtree(folder)
        save_tokenized(folder, dataclasses.replace(first, labels=1 - first.labels))
    else:
        ids = np.load(folder / "input_ids.npy")
        np.save(folder / "input_ids.npy", ids[::-1].copy(), allow_pickle=False)
    clear_memory_cache()
    before = cache_info().tokenizations
    with caplog.at_level("WARNING", logger="hpo.data.tokenize"):
        again = tokenize_pairs(
            tokenizers["roberta"], pairs, labels, 32, "planted", cache_dir=tmp_path
        )
    assert cache_info().tokenizations == before + 1, "tokenized again, not read"
    assert [r.message for r in caplog.records if "rebuilding" in r.message]
    np.testing.assert_array_equal(again.labels, labels)
    assert all(np.array_equal(a, b) for a, b in zip(first.input_ids, again.input_ids, strict=True))
    np.testing.assert_array_equal(np.load(folder / "labels.npy"), labels)


def test_disk_cache_is_keyed_on_content(tokenizers, data, tmp_path):
    pairs, labels = data
    tokenize_pairs(tokenizers["bert"], pairs, labels, 32, "train", cache_dir=tmp_path)
    clear_memory_cache()
    before = cache_info().tokenizations
    flipped = [1 - label for label in labels]
    split = tokenize_pairs(tokenizers["bert"], pairs, flipped, 32, "train", cache_dir=tmp_path)

    assert cache_info().tokenizations == before + 1
    np.testing.assert_array_equal(split.labels, flipped)


def test_fingerprint_separates_tokenizers_saved_at_one_path_and_ignores_call_state():
    small, large = _roberta(vocab_size=300), _roberta(vocab_size=400)
    small.name_or_path = large.name_or_path = "/models/encoder"
    assert tokenizer_fingerprint(small) != tokenizer_fingerprint(large)

    used = _roberta(vocab_size=300)
    used(["a b"], ["c d"], truncation="only_second", max_length=16)  # leaves truncation set
    assert tokenizer_fingerprint(_roberta(vocab_size=300)) == tokenizer_fingerprint(used)


def test_fingerprint_follows_added_tokens():
    tokenizer = _bert()
    before = tokenizer_fingerprint(tokenizer)
    tokenizer.add_tokens(["[NEW]"])
    assert tokenizer_fingerprint(tokenizer) != before


def test_empty_split_is_a_data_error(tokenizers):
    with pytest.raises(DataError, match="no examples"):
        tokenize_pairs(tokenizers["bert"], [], [], 16, "empty")


def test_rejects_mismatched_or_fractional_labels(tokenizers):
    pairs = [("insomnia", "i feel sad"), ("insomnia", "tired")]
    with pytest.raises(ValueError, match="2 pairs but 1 labels"):
        tokenize_pairs(tokenizers["bert"], pairs, [1], 16, "bad")
    with pytest.raises(ValueError, match="labels must be integers"):
        tokenize_pairs(tokenizers["bert"], pairs, [0.5, 1.0], 16, "bad")


@pytest.mark.parametrize("name", ["roberta", "deberta_v2"])
def test_examples_collate_into_a_model_batch(tokenizers, data, name):
    tokenizer = tokenizers[name]
    pairs, labels = data
    split = tokenize_pairs(tokenizer, pairs, labels, 32, cache_key=f"collate-{name}")
    features, counts = split.sequences(range(8))
    assert counts == [1] * 8  # truncate: one sequence per example
    assert features[3]["attention_mask"].tolist() == [1] * split.lengths[3]

    batch = Collator(tokenizer.pad_token_id)(features)
    width = int(split.lengths[:8].max())
    assert batch["input_ids"].shape == (8, width)
    assert batch["attention_mask"].sum().item() == split.lengths[:8].sum()
    assert ("token_type_ids" in batch) is (split.token_type_ids is not None)
    np.testing.assert_array_equal(split.labels[:8], labels[:8])


def test_tokenizes_each_distinct_text_once_in_batched_calls(tokenizers, data, monkeypatch):
    pairs, labels = data
    calls = []
    tokenizer = tokenizers["roberta"]
    original = type(tokenizer).__call__

    def counting(self, *args, **kwargs):
        calls.append(len(args[0]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "__call__", counting)
    tokenize_pairs(tokenizer, pairs, labels, 32, cache_key="batched")
    # A one-pair probe of the special tokens, the few distinct criterion texts, each post once.
    assert calls == [1, len(CRITERIA), len({post for _, post in pairs})]


@pytest.mark.parametrize("name", ["roberta", "bert", "deberta_v2"])
def test_assembly_equals_the_tokenizers_own_truncated_pairs_and_single_texts(
    tokenizers, data, name
):
    tokenizer = tokenizers[name]
    pairs, labels = data
    split = tokenize_pairs(tokenizer, pairs, labels, 40, cache_key=f"same-{name}")
    reference = tokenizer(
        [a for a, _ in pairs], [b for _, b in pairs], truncation="only_second", max_length=40
    )
    assert [ids.tolist() for ids in split.input_ids] == reference["input_ids"]
    if split.token_type_ids is not None:
        assert [t.tolist() for t in split.token_type_ids] == reference["token_type_ids"]
    posts = sorted({post for _, post in pairs})
    alone = tokenize_pairs(
        tokenizer,
        [(None, post) for post in posts],
        np.zeros((len(posts), 9)),
        40,
        cache_key=f"alone-{name}",
    )
    assert [ids.tolist() for ids in alone.input_ids] == tokenizer(
        posts, truncation=True, max_length=40
    )["input_ids"]
    assert alone.labels.shape == (len(posts), 9)


@pytest.mark.parametrize("name", ["roberta", "bert", "deberta_v2"])
def test_chunks_cover_every_token_of_a_long_text(tokenizers, name):
    tokenizer = tokenizers[name]
    post = " ".join(WORDS * 6)  # far longer than max_length
    split = tokenize_pairs(
        tokenizer,
        [(CRITERIA[0], post), (CRITERIA[1], "i feel sad")],
        [1, 0],
        32,
        cache_key=f"chunks-{name}",
        long_text="chunks",
    )
    whole = tokenizer(post, add_special_tokens=False)["input_ids"]
    criterion = tokenizer(CRITERIA[0], add_special_tokens=False)["input_ids"]
    first, last = split.offsets[0], split.offsets[1]
    # the short post is one sequence
    assert last - first > 3 and split.offsets[2] - split.offsets[1] == 1
    seen = []
    for ids in split.input_ids[first:last]:
        # every chunk is a full pair
        assert len(ids) <= 32 and ids[1 : 1 + len(criterion)].tolist() == criterion
        body = [t for t in ids.tolist()[1 + len(criterion) :] if t not in tokenizer.all_special_ids]
        seen.append(body)
    covered = seen[0]
    for body in seen[1:]:  # consecutive chunks overlap, and together they are the whole post
        overlap = next(k for k in range(len(body), 0, -1) if covered[-k:] == body[:k])
        assert overlap > 0
        covered += body[overlap:]
    assert covered == whole
    assert split.seen_tokens[0] == split.text_tokens[0] == len(whole) and split.coverage == 1.0
    assert split.lengths[0] == sum(len(ids) for ids in split.input_ids[first:last])


def test_head_tail_keeps_the_start_and_the_end_and_coverage_says_what_was_cut(tokenizers):
    tokenizer = tokenizers["bert"]
    post = " ".join(WORDS * 3)
    whole = tokenizer(post, add_special_tokens=False)["input_ids"]
    kept = {}
    for strategy in ("truncate", "head_tail"):
        split = tokenize_pairs(
            tokenizer,
            [(None, post)],
            np.zeros((1, 9)),
            40,
            cache_key=f"ht-{strategy}",
            long_text=strategy,
        )
        assert len(split.input_ids) == 1 and len(split.input_ids[0]) == 40
        kept[strategy] = split.input_ids[0].tolist()[1:-1]  # without [CLS] and [SEP]
        assert split.coverage == pytest.approx(38 / len(whole))
    assert kept["truncate"] == whole[:38]
    head = int(38 * 0.25)
    assert kept["head_tail"] == whole[:head] + whole[-(38 - head) :]


def test_unknown_long_text_strategy_is_a_usage_error(tokenizers, data):
    pairs, labels = data
    with pytest.raises(UsageError, match="unknown long_text 'middle'"):
        tokenize_pairs(tokenizers["bert"], pairs, labels, 32, cache_key="bad", long_text="middle")


def test_chunks_per_text_counts_the_windows_tokenization_makes():
    from hpo.data.tokenize import _windows, chunks_per_text

    lengths = np.arange(0, 3000, 7)
    for budget in (30, 126, 253, 509):
        want = [len(_windows(int(n), budget, "chunks")) for n in lengths]
        assert chunks_per_text(lengths, budget).tolist() == want
