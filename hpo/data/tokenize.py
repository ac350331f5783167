"""Tokenize (criterion, text) pairs, or texts alone, once per process and once per cache directory.

Texts longer than ``max_length`` are handled by a ``long_text`` strategy: ``truncate``
(keep the start), ``head_tail`` (keep the start and the end) or ``chunks`` (overlapping
windows that cover every token; a model pools the windows' logits per example). Each
example records how many of its text's tokens the model sees.

Every trial of a study tokenizes the same splits with the same tokenizer, so the work is
cached twice: in a process-wide dict (a repeated call does nothing at all) and, when a
``cache_dir`` is given, on disk as plain arrays so a fresh worker process reuses what an
earlier worker computed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import joblib
import numpy as np

from hpo.data.tokenized import TokenizedSplit, discard_tokenized, load_tokenized, save_tokenized
from hpo.errors import DataError, UsageError
from hpo.vocabulary import LONG_TEXT, LongText

log = logging.getLogger(__name__)

# head_tail keeps the first quarter and the last three quarters (Sun et al., 2019: 128 + 382)
HEAD_SHARE = 0.25
# chunks overlap by a quarter window, so a sentence cut at one edge is whole in the next
CHUNK_OVERLAP = 0.25


@dataclass
class CacheInfo:
    memory_hits: int = 0
    memory_misses: int = 0
    tokenizations: int = 0  # batched tokenizer runs; a disk-cache hit does not add one


_info = CacheInfo()
_memory_cache: dict[tuple, TokenizedSplit] = {}
_backend_digests: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def cache_info() -> CacheInfo:
    """A snapshot of the counters, so callers can check that a cached call did no work."""
    return CacheInfo(_info.memory_hits, _info.memory_misses, _info.tokenizations)


def clear_memory_cache() -> None:
    """Forget in-process results; the disk cache and the counters are untouched."""
    _memory_cache.clear()


def tokenize_pairs(
    tokenizer: Any,
    pairs: Sequence[tuple[str | None, str]],
    labels: Sequence[int] | Sequence[Sequence[int]] | np.ndarray,
    max_length: int,
    cache_key: str | None,
    cache_dir: str | Path | None = None,
    long_text: LongText = "truncate",
) -> TokenizedSplit:
    """Tokenize ``(first, second)`` pairs, cutting only the second text; a first text of None
    means the second stands alone (every pair of a split has one, or none does).

    ``cache_key`` must identify the data (task, data fingerprint, split): the in-memory
    cache trusts it and does not re-hash the texts. The tokenizer, ``max_length`` and
    ``long_text`` are folded into the key here. The disk cache hashes the texts and labels.
    A ``cache_key`` of None caches nothing: prediction sees each text once, and a process
    predicting on a stream of posts must not keep every tokenized post alive.
    """
    if long_text not in LONG_TEXT or long_text == "sentences":
        choices = ", ".join(t for t in LONG_TEXT if t != "sentences")
        raise UsageError(f"unknown long_text {long_text!r} for pairs; choose one of {choices}")
    if len(pairs) != len(labels):
        raise ValueError(f"got {len(pairs)} pairs but {len(labels)} labels")
    return cached_split(
        tokenizer,
        list(pairs),
        labels,
        (max_length, long_text),
        lambda pairs, labels: _tokenize(tokenizer, pairs, labels, max_length, long_text),
        cache_key,
        cache_dir,
    )


def cached_split(
    tokenizer: Any,
    texts: list,
    labels,
    settings: tuple,
    tokenize: Any,
    cache_key: str | None,
    cache_dir: str | Path | None,
) -> TokenizedSplit:
    """``tokenize(texts, labels)``, cached in the process under ``cache_key`` and, with a
    ``cache_dir``, on disk under a hash of the texts and labels; ``settings`` (lengths, the
    reading) and the tokenizer's fingerprint are part of both keys."""
    if len(texts) != len(labels):
        raise ValueError(f"got {len(texts)} texts but {len(labels)} labels")
    if not len(texts):
        raise DataError(f"no examples to tokenize for {cache_key!r}; is the split empty?")
    labels = _as_int_labels(labels)
    if cache_key is None:
        return tokenize(texts, labels)
    fingerprint = tokenizer_fingerprint(tokenizer)
    key = (cache_key, fingerprint, *settings)
    if key in _memory_cache:
        _info.memory_hits += 1
        return _memory_cache[key]
    _info.memory_misses += 1
    if cache_dir is None:
        split = tokenize(texts, labels)
    else:
        split = _disk_cached(cache_dir, texts, labels, (fingerprint, *settings), tokenize)
    _memory_cache[key] = split
    return split


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """Identifies what a tokenizer does, so two tokenizers saved at one path never collide.

    The cheap parts are read on every call so that ``add_tokens`` after a first call
    still changes the fingerprint; the full-vocabulary digest is computed once per object.
    """
    digest = _backend_digests.get(tokenizer)
    if digest is None:
        digest = _backend_digests[tokenizer] = _backend_digest(tokenizer)
    parts = (
        type(tokenizer).__name__,
        str(getattr(tokenizer, "name_or_path", "")),
        str(len(tokenizer)),
        str(getattr(tokenizer, "truncation_side", "right")),
        digest,
    )
    return "|".join(parts)


def _backend_digest(tokenizer: Any) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        text = json.dumps(sorted(tokenizer.get_vocab().items()))
    else:
        state = json.loads(backend.to_str())
        # A call leaves its truncation settings on the backend; they must not change the key.
        state.pop("truncation", None)
        state.pop("padding", None)
        text = json.dumps(state, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _disk_cached(
    cache_dir: str | Path, texts: list, labels: np.ndarray, settings: tuple, tokenize: Any
) -> TokenizedSplit:
    """Tokenize once per cache directory, shared by every worker that can read it.

    Stored as plain ``.npy`` arrays loaded with ``allow_pickle=False`` (joblib.Memory would
    pickle, and a shared cache directory must never be a way to run code in a worker);
    joblib only hashes the inputs into the key.
    """
    folder = Path(cache_dir) / joblib.hash((settings, texts, labels.tolist()))
    if (folder / "labels.npy").exists():
        try:
            return load_tokenized(folder, labels)
        except (
            OSError,
            ValueError,
            EOFError,
            KeyError,
        ) as exc:  # truncated, emptied, partly deleted, edited or planted: never trained on
            log.warning("tokenization cache %s is damaged (%s); rebuilding it", folder, exc)
            discard_tokenized(folder)
    split = tokenize(texts, labels)
    save_tokenized(folder, split)
    return split


@dataclass(frozen=True)
class SpecialTokens:
    """The special tokens a tokenizer puts around one text or a pair: ``pre first mid second
    post`` (``pre second post`` alone), read off one probe encoding. Tokenizing each distinct
    text once and assembling here gives the tokenizer's own pair encoding (checked for BERT,
    RoBERTa and DeBERTa-v2) at a ninth of the work when a post is paired with nine criteria."""

    pre: list[int]
    mid: list[int]
    post: list[int]
    types: tuple[int, int, int, int, int] | None  # type id of pre, first, mid, second, post

    @classmethod
    def of(cls, tokenizer: Any, pair: bool) -> SpecialTokens:
        encoding = tokenizer(["a"], ["b"]) if pair else tokenizer(["b"])
        ids, owner = encoding["input_ids"][0], encoding.sequence_ids(0)

        def span(sequence: int) -> tuple[int, int]:
            return owner.index(sequence), len(owner) - owner[::-1].index(sequence)

        second = span(1 if pair else 0)
        first = span(0) if pair else (second[0], second[0])
        types = None
        if "token_type_ids" in encoding:
            t = encoding["token_type_ids"][0]
            types = (t[0], t[first[0]], t[first[1]], t[second[0]], t[-1])
        return cls(ids[: first[0]], ids[first[1] : second[0]], ids[second[1] :], types)

    def assemble(self, first: list[int], second: list[int]) -> tuple[np.ndarray, np.ndarray | None]:
        ids = np.asarray(self.pre + first + self.mid + second + self.post, dtype=np.int32)
        if self.types is None:
            return ids, None
        parts = (self.pre, first, self.mid, second, self.post)
        return ids, np.repeat(np.asarray(self.types, dtype=np.int32), [len(p) for p in parts])


def _tokenize(
    tokenizer: Any,
    pairs: list[tuple[str | None, str]],
    labels: np.ndarray,
    max_length: int,
    long_text: LongText,
) -> TokenizedSplit:
    _info.tokenizations += 1
    paired = pairs[0][0] is not None
    if any((first is not None) != paired for first, _ in pairs):
        raise ValueError("every pair of a split needs a first text, or none may have one")
    template = SpecialTokens.of(tokenizer, paired)
    firsts = distinct_ids(tokenizer, [first for first, _ in pairs]) if paired else {None: []}
    if paired:
        _check_first_texts_fit(tokenizer, firsts, max_length)
    seconds = distinct_ids(tokenizer, [second for _, second in pairs])
    specials = len(template.pre) + len(template.mid) + len(template.post)
    input_ids, token_types, counts, text_tokens, seen_tokens = [], [], [], [], []
    for first, second in pairs:
        first_ids, second_ids = firsts[first], seconds[second]
        budget = max_length - specials - len(first_ids)
        windows = _windows(len(second_ids), budget, long_text)
        for window in windows:
            ids, types = template.assemble(
                first_ids, [t for start, end in window for t in second_ids[start:end]]
            )
            input_ids.append(ids)
            token_types.append(types)
        counts.append(len(windows))
        text_tokens.append(len(second_ids))
        seen_tokens.append(
            min(len(second_ids), budget) if long_text != "chunks" else len(second_ids)
        )
    return TokenizedSplit(
        input_ids=input_ids,
        token_type_ids=None if template.types is None else token_types,
        offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        labels=labels,
        text_tokens=np.asarray(text_tokens, dtype=np.int64),
        seen_tokens=np.asarray(seen_tokens, dtype=np.int64),
    )


def chunks_per_text(n_tokens: np.ndarray, budget: int) -> np.ndarray:
    """How many ``chunks`` windows of ``budget`` text tokens each text of ``n_tokens`` needs."""
    step = budget - int(budget * CHUNK_OVERLAP)
    return np.where(n_tokens <= budget, 1, -(-(np.asarray(n_tokens) - budget) // step) + 1)


def _windows(n: int, budget: int, long_text: LongText) -> list[list[tuple[int, int]]]:
    """The token ranges of an ``n``-token text that each sequence holds, ``budget`` at most."""
    if n <= budget or long_text == "truncate":
        return [[(0, min(n, budget))]]
    if long_text == "head_tail":
        head = int(budget * HEAD_SHARE)
        return [[(0, head), (n - (budget - head), n)]]
    step = budget - int(budget * CHUNK_OVERLAP)
    return [[(start, min(start + budget, n))] for start in range(0, n - budget + step, step)]


def distinct_ids(tokenizer: Any, texts: list[str]) -> dict[str, list[int]]:
    """Token ids of each distinct text, without special tokens, in one batched call."""
    unique = list(dict.fromkeys(texts))
    # verbose=False: uncut texts are the point here, not a reason to warn that they exceed the
    # model's limit
    ids = tokenizer(unique, add_special_tokens=False, verbose=False)["input_ids"]
    return dict(zip(unique, ids, strict=True))


def _check_first_texts_fit(tokenizer: Any, firsts: dict[str, list[int]], max_length: int) -> None:
    """Raise before assembling, naming the text and the fix: the second text must keep at
    least one token once the first text and the special tokens are in."""
    longest = max(firsts, key=lambda text: len(firsts[text]))
    specials = tokenizer.num_special_tokens_to_add(pair=True)
    needed = len(firsts[longest]) + specials + 1
    if max_length < needed:
        raise UsageError(
            f"max_length={max_length} leaves no room for the post: the criterion text "
            f"{longest[:60]!r} takes {len(firsts[longest])} tokens plus {specials} special "
            f"tokens. Raise max_length to at least {needed}."
        )


def _as_int_labels(labels) -> np.ndarray:
    array = np.asarray(labels)
    if array.dtype.kind not in "biuf" or (array.dtype.kind == "f" and np.any(array % 1 != 0)):
        raise ValueError(
            f"labels must be integers; got {array.dtype} values such as {array[:3].tolist()}"
        )
    return array.astype(np.int64)
