"""Every sentence of a post (pysbd's boundaries), and annotated sentences aligned to them by text.

The evidence task scores every sentence a user's post has, so candidates come from a
maintained splitter, not from the annotation file (which lists ~6% of sentences). An
annotation is placed by finding its text in the post, verbatim or up to whitespace, and
labels the split sentences it covers.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# a line break ends a sentence in a Reddit post, whatever pysbd thinks
_BLOCKS = re.compile(r"\n\s*")
NOT_IN_POST = "its text is not in the post, verbatim or up to whitespace"
NO_SENTENCE = "it covers no split sentence by half or more"


@dataclass(frozen=True)
class Sentence:
    start: int
    end: int
    text: str


@functools.cache
def _segmenter():
    import pysbd  # imported on first use: only the evidence task needs it

    return pysbd.Segmenter(language="en", clean=False)


# the texts ``presplit`` split or read from disk in this process: a corpus's posts
_PRESPLIT: dict[str, tuple[Sentence, ...]] = {}


def split_sentences(text: str) -> list[Sentence]:
    """The post's sentences in order, as stripped character spans of ``text``."""
    found = _PRESPLIT.get(text)
    return list(found if found is not None else _split(text))


def presplit(texts: Sequence[str], cache_dir: str | Path) -> None:
    """Split ``texts`` once per machine, not once per process: read from ``cache_dir`` where an
    earlier process left the same texts' sentences, else split here and leave them there.
    pysbd took ~25 s for the real ReDSM5's 1,484 posts on a 2-core machine (most of it compiling
    regular expressions it builds per text), and every worker of an evidence or whole_post study,
    and every retraining of its finalize, splits the same posts. Stored as (text, start, end)
    rows of plain integers, checked against the texts before use."""
    import joblib
    import pysbd

    texts = list(texts)
    splitter = (pysbd.__version__, _BLOCKS.pattern)  # another splitter: other sentences
    path = Path(cache_dir) / f"sentences-{joblib.hash((splitter, texts))}.npy"
    rows = _read_spans(path, texts)
    if rows is None:
        rows = [(i, s.start, s.end) for i, text in enumerate(texts) for s in _split(text)]
        _write_spans(path, np.asarray(rows, dtype=np.int64).reshape(-1, 3))
    by_text: list[list[Sentence]] = [[] for _ in texts]
    for i, start, end in rows:
        by_text[i].append(Sentence(start, end, texts[i][start:end]))
    _PRESPLIT.update(zip(texts, map(tuple, by_text), strict=True))


def _read_spans(path: Path, texts: list[str]) -> list[tuple[int, int, int]] | None:
    """The rows cached at ``path`` if they are sentences of ``texts`` (in order, stripped,
    non-empty, within their text); None where there are none or they are not."""
    try:
        rows = np.load(path, allow_pickle=False)
    except (OSError, ValueError):  # none yet, or not an array of ours
        return None
    if rows.ndim != 2 or rows.shape[1] != 3 or rows.dtype != np.int64:
        return None
    found = [tuple(map(int, row)) for row in rows]
    last = (-1, 0)
    for i, start, end in found:
        if not 0 <= i < len(texts) or (i, start) < last or not 0 <= start < end <= len(texts[i]):
            return None
        if texts[i][start:end] != texts[i][start:end].strip():
            return None
        last = (i, end)
    return found


def _write_spans(path: Path, rows: np.ndarray) -> None:
    """Written aside, then renamed into place: a worker never reads a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
    np.save(staging, rows, allow_pickle=False)
    os.replace(staging, path)


# pysbd takes ~1 ms a sentence; both tasks and every trial of a worker split the same posts
@functools.lru_cache(maxsize=65536)
def _split(text: str) -> tuple[Sentence, ...]:
    sentences = []
    block_start = 0
    for block in _BLOCKS.split(text):
        block_start = text.find(block, block_start) if block else block_start
        cursor = block_start
        for piece in _segmenter().segment(block) if block.strip() else ():
            piece = piece.strip()
            at = text.find(piece, cursor) if piece else -1
            if at < 0:  # pysbd returned text it changed; skip rather than guess a span
                continue
            sentences.append(Sentence(at, at + len(piece), piece))
            cursor = at + len(piece)
        block_start += len(block)
    return tuple(sentences)


def locate(post_text: str, sentence_text: str) -> tuple[int, int] | None:
    """The span of ``sentence_text`` in the post: verbatim first, then up to whitespace."""
    needle = sentence_text.strip()
    if not needle:
        return None
    at = post_text.find(needle)
    if at >= 0:
        return at, at + len(needle)
    match = re.search(r"\s+".join(map(re.escape, needle.split())), post_text)
    return match.span() if match else None


def covered(sentences: list[Sentence], span: tuple[int, int]) -> list[int]:
    """Indices of the sentences an annotated span covers: half or more of the sentence lies in
    the span, or half or more of the span lies in the sentence (the annotator's boundary and
    pysbd's can differ by a clause)."""
    start, end = span
    hits = []
    for i, sentence in enumerate(sentences):
        overlap = min(end, sentence.end) - max(start, sentence.start)
        if overlap > 0 and 2 * overlap >= min(sentence.end - sentence.start, end - start):
            hits.append(i)
    return hits
