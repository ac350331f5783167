"""Every sentence of a post (pysbd's boundaries), and annotated sentences aligned to them by text.

The evidence task scores every sentence a user's post has, so candidates come from a
maintained splitter, not from the annotation file (which lists ~6% of sentences). An
annotation is placed by finding its text in the post, verbatim or up to whitespace, and
labels the split sentences it covers.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

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


def split_sentences(text: str) -> list[Sentence]:
    """The post's sentences in order, as stripped character spans of ``text``."""
    return list(_split(text))


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
