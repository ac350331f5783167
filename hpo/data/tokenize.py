"""Tokenize (criterion, post) pairs once per process and once per cache directory.

Every trial of a study tokenizes the same splits with the same tokenizer, so the work is
cached twice: in a process-wide dict (a repeated call does nothing at all) and, when a
``cache_dir`` is given, on disk as plain arrays so a fresh worker process reuses what an
earlier worker computed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import joblib
import numpy as np

from hpo.errors import DataError, UsageError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenizedSplit:
    """Unpadded token ids of one split; batches are padded later, per batch."""

    input_ids: list[np.ndarray]
    token_type_ids: list[np.ndarray] | None  # None when the tokenizer does not produce them
    labels: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def example(self, i: int) -> dict[str, np.ndarray]:
        ids = self.input_ids[i]
        features = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if self.token_type_ids is not None:
            features["token_type_ids"] = self.token_type_ids[i]
        features["labels"] = self.labels[i]
        return features

    # Lets the split serve directly as a map-style dataset for a DataLoader.
    __getitem__ = example


@dataclass
class CacheInfo:
    memory_hits: int = 0
    memory_misses: int = 0
    tokenizations: int = 0  # batched tokenizer runs; a disk-cache hit does not add one


_info = CacheInfo()
_memory_cache: dict[tuple[str, str, int], TokenizedSplit] = {}
_backend_digests: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def cache_info() -> CacheInfo:
    """A snapshot of the counters, so callers can check that a cached call did no work."""
    return CacheInfo(_info.memory_hits, _info.memory_misses, _info.tokenizations)


def clear_memory_cache() -> None:
    """Forget in-process results; the disk cache and the counters are untouched."""
    _memory_cache.clear()


def tokenize_pairs(
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    labels: Sequence[int],
    max_length: int,
    cache_key: str,
    cache_dir: str | Path | None = None,
) -> TokenizedSplit:
    """Tokenize ``(first, second)`` pairs, truncating only the second text.

    ``cache_key`` must identify the data (task, data fingerprint, split): the in-memory
    cache trusts it and does not re-hash the texts. The tokenizer and ``max_length`` are
    folded into the key here. The disk cache hashes the texts and labels themselves.
    """
    if len(pairs) != len(labels):
        raise ValueError(f"got {len(pairs)} pairs but {len(labels)} labels")
    if not pairs:
        raise DataError(f"no examples to tokenize for {cache_key!r}; is the split empty?")
    fingerprint = tokenizer_fingerprint(tokenizer)
    key = (cache_key, fingerprint, max_length)
    if key in _memory_cache:
        _info.memory_hits += 1
        return _memory_cache[key]
    _info.memory_misses += 1
    pairs, labels = list(pairs), list(labels)
    if cache_dir is None:
        split = _tokenize(tokenizer, pairs, labels, max_length)
    else:
        split = _disk_cached(cache_dir, tokenizer, pairs, labels, max_length, fingerprint)
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


def _disk_cached(cache_dir: str | Path, tokenizer: Any, pairs: list[tuple[str, str]], labels: list[int],
                 max_length: int, fingerprint: str) -> TokenizedSplit:
    """Tokenize once per cache directory, shared by every worker that can read it.

    Stored as plain ``.npy`` arrays loaded with ``allow_pickle=False`` (joblib.Memory would
    pickle, and a shared cache directory must never be a way to run code in a worker);
    joblib only hashes the inputs into the key.
    """
    folder = Path(cache_dir) / joblib.hash((fingerprint, max_length, pairs, labels))
    if (folder / "labels.npy").exists():
        try:
            return _load_cached(folder, len(pairs))
        except (OSError, ValueError, EOFError, KeyError) as exc:  # truncated, emptied or partly deleted
            log.warning("tokenization cache %s is damaged (%s); rebuilding it", folder, exc)
            _discard(folder)
    split = _tokenize(tokenizer, pairs, labels, max_length)
    arrays = {"input_ids": np.concatenate(split.input_ids),
              "offsets": np.concatenate([[0], np.cumsum(split.lengths)]),
              "labels": split.labels}
    if split.token_type_ids is not None:
        arrays["token_type_ids"] = np.concatenate(split.token_type_ids)
    staging = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")  # workers race: write aside, rename
    staging.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        np.save(staging / f"{name}.npy", array, allow_pickle=False)
    try:
        staging.rename(folder)
    except OSError:  # another worker got there first with the same content
        shutil.rmtree(staging, ignore_errors=True)
    return split


def _load_cached(folder: Path, n_examples: int) -> TokenizedSplit:
    """The cached split, checked for consistency: a damaged file raises instead of training on garbage."""
    arrays = {f.stem: np.load(f, allow_pickle=False) for f in folder.glob("*.npy")}
    ids, offsets, labels = arrays["input_ids"], arrays["offsets"], arrays["labels"]
    types = arrays.get("token_type_ids")
    if (len(labels) != n_examples or len(offsets) != n_examples + 1 or offsets[0] != 0
            or offsets[-1] != len(ids) or np.any(np.diff(offsets) < 0)
            or (types is not None and len(types) != len(ids))):
        raise ValueError(f"arrays do not fit {n_examples} examples")
    return TokenizedSplit(
        input_ids=np.split(ids, offsets[1:-1]),
        token_type_ids=None if types is None else np.split(types, offsets[1:-1]),
        labels=labels,
        lengths=np.diff(offsets),
    )


def _discard(folder: Path) -> None:
    """Move aside first, so a worker reading it meanwhile never sees a half-deleted folder."""
    doomed = folder.with_name(f"{folder.name}.{os.getpid()}.damaged")
    try:
        folder.rename(doomed)
    except OSError:  # another worker moved it already
        return
    shutil.rmtree(doomed, ignore_errors=True)


def _tokenize(
    tokenizer: Any,
    pairs: list[tuple[str, str]],
    labels: list[int],
    max_length: int,
) -> TokenizedSplit:
    _info.tokenizations += 1
    firsts = [first for first, _ in pairs]
    seconds = [second for _, second in pairs]
    _check_first_texts_fit(tokenizer, firsts, max_length)
    encoded = tokenizer(
        firsts,
        seconds,
        truncation="only_second",
        max_length=max_length,
        padding=False,
        return_attention_mask=False,
    )
    input_ids = [np.asarray(ids, dtype=np.int32) for ids in encoded["input_ids"]]
    token_type_ids = None
    if "token_type_ids" in encoded:
        token_type_ids = [np.asarray(ids, dtype=np.int32) for ids in encoded["token_type_ids"]]
    return TokenizedSplit(
        input_ids=input_ids,
        token_type_ids=token_type_ids,
        labels=_as_int_labels(labels),
        lengths=np.fromiter((len(ids) for ids in input_ids), dtype=np.int64, count=len(input_ids)),
    )


def _check_first_texts_fit(tokenizer: Any, firsts: list[str], max_length: int) -> None:
    """Raise before the batched call, whose own error does not say which text or what to do.

    The second text must keep at least one token: the tokenizer rejects a pair whose
    first text and special tokens alone fill ``max_length``.
    """
    unique = list(dict.fromkeys(firsts))  # criterion texts repeat across every post
    lengths = [len(ids) for ids in tokenizer(unique, add_special_tokens=False)["input_ids"]]
    longest = int(np.argmax(lengths))
    specials = tokenizer.num_special_tokens_to_add(pair=True)
    needed = lengths[longest] + specials + 1
    if max_length < needed:
        raise UsageError(
            f"max_length={max_length} leaves no room for the post: the criterion text "
            f"{unique[longest][:60]!r} takes {lengths[longest]} tokens plus {specials} special "
            f"tokens. Raise max_length to at least {needed}."
        )


def _as_int_labels(labels: list[int]) -> np.ndarray:
    array = np.asarray(labels)
    if array.dtype.kind not in "biuf" or (array.dtype.kind == "f" and np.any(array % 1 != 0)):
        raise ValueError(
            f"labels must be integers; got {array.dtype} values such as {array[:3].tolist()}"
        )
    return array.astype(np.int64)
