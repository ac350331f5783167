"""Read a whole post: its sentences packed, whole and in order, into windows of ``max_length``.

``whole_post`` scores every sentence of a post, so no token is cut away (head_tail drops the
middle of a long post, where ReDSM5's evidence often is). A window takes sentences until the next
would not fit; only a sentence longer than a window is cut, into pieces of a window each. Windows
do not overlap, so a post costs its own tokens plus the special tokens of each window (fewer
sequences than ``chunks``' overlapping ones). Every token records which sentence of the post it
belongs to (``TokenizedSplit.segments``), which is how the model scores sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hpo.data.tokenize import SpecialTokens, cached_split, distinct_ids
from hpo.data.tokenized import TokenizedSplit

READING = "sentences"  # the long_text whole_post reads with


def tokenize_posts(
    tokenizer: Any,
    posts: Sequence[Sequence[str]],
    labels: Sequence[Sequence[int]] | np.ndarray,
    max_length: int,
    cache_key: str | None,
    cache_dir: str | Path | None = None,
) -> TokenizedSplit:
    """Tokenize each post, given as its sentences, into windows of whole sentences; cached as
    ``tokenize_pairs`` caches (``cache_key`` None: not at all)."""
    return cached_split(
        tokenizer,
        [tuple(sentences) for sentences in posts],
        labels,
        (max_length, READING),
        lambda posts, labels: _pack(tokenizer, posts, labels, max_length),
        cache_key,
        cache_dir,
    )


def _pack(
    tokenizer: Any, posts: list[tuple[str, ...]], labels: np.ndarray, max_length: int
) -> TokenizedSplit:
    template = SpecialTokens.of(tokenizer, pair=False)
    budget = max_length - len(template.pre) - len(template.post)
    if budget < 1:
        raise ValueError(f"max_length {max_length} leaves no room for text")
    # a sentence after the first is read as it follows a space in the post (BPE marks that)
    ids_of = distinct_ids(
        tokenizer, [_spaced(i, text) for sentences in posts for i, text in enumerate(sentences)]
    )
    input_ids, token_types, segments, counts, text_tokens = [], [], [], [], []
    for sentences in posts:
        windows = pack_windows(
            [ids_of[_spaced(i, text)] for i, text in enumerate(sentences)], budget
        )
        for tokens, owners in windows:
            ids, types = template.assemble([], tokens)
            input_ids.append(ids)
            token_types.append(types)
            segment = np.full(len(ids), -1, dtype=np.int32)
            segment[len(template.pre) : len(template.pre) + len(owners)] = owners
            if not owners:  # a post without a token: its one "sentence" is the first token
                segment[0] = 0
            segments.append(segment)
        counts.append(len(windows))
        text_tokens.append(sum(len(ids_of[_spaced(i, t)]) for i, t in enumerate(sentences)))
    text_tokens = np.asarray(text_tokens, dtype=np.int64)
    return TokenizedSplit(
        input_ids=input_ids,
        token_type_ids=None if template.types is None else token_types,
        offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        labels=labels,
        text_tokens=text_tokens,
        seen_tokens=text_tokens.copy(),  # every token of every sentence
        segments=segments,
    )


def pack_windows(sentences: list[list[int]], budget: int) -> list[tuple[list[int], list[int]]]:
    """Sentences' token ids packed greedily into windows of at most ``budget`` tokens: per
    window its tokens and, per token, the sentence it belongs to. A sentence is cut only when it
    is longer than a window; its last piece starts the next window's fill. A post without a
    token still gets one (empty) window."""
    windows: list[tuple[list[int], list[int]]] = []
    tokens: list[int] = []
    owners: list[int] = []
    for index, ids in enumerate(sentences):
        if tokens and len(tokens) + len(ids) > budget:
            windows.append((tokens, owners))
            tokens, owners = [], []
        while len(ids) > budget:  # only a sentence longer than a window is cut
            windows.append((ids[:budget], [index] * budget))
            ids = ids[budget:]
        tokens, owners = tokens + ids, owners + [index] * len(ids)
    if tokens or not windows:
        windows.append((tokens, owners))
    return windows


def _spaced(index: int, text: str) -> str:
    return text if index == 0 else " " + text
