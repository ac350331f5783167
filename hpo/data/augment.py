"""Word-level text augmentation of training examples, deterministic per seed.

Hand-written: nlpaug's word operations are the maintained candidate, but it has had no
release since 2022 and pulls nltk; random deletion and swap (Wei & Zou, EDA 2019) are a
few lines. Only the post or sentence is edited, never the criterion text, and only
training examples: validation and test stay as users' text will be.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from hpo.data.tasks import Example

AUGMENTATIONS = ("none", "word_dropout", "word_swap")


def augment_examples(
    examples: Sequence[Example], method: str, rate: float, seed: int
) -> list[Example]:
    """A copy of ``examples`` with each text edited by ``method`` at ``rate``; the same
    ``seed`` gives the same edits."""
    if method not in AUGMENTATIONS:
        raise ValueError(f"augmentation must be one of {', '.join(AUGMENTATIONS)}, got {method!r}")
    if method == "none" or rate == 0:
        return list(examples)
    rng = np.random.default_rng(seed)
    edit = _drop_words if method == "word_dropout" else _swap_words
    return [_edited(example, edit, rate, rng) for example in examples]


def _edited(example: Example, edit, rate: float, rng: np.random.Generator) -> Example:
    """A whole_post example is edited sentence by sentence: its evidence stays on its sentence."""
    if not example.sentences:
        return dataclasses.replace(example, text_b=edit(example.text_b, rate, rng))
    sentences = tuple(edit(sentence, rate, rng) for sentence in example.sentences)
    return dataclasses.replace(example, text_b=" ".join(sentences), sentences=sentences)


def _drop_words(text: str, rate: float, rng: np.random.Generator) -> str:
    """Each word is left out with probability ``rate``; a text keeps at least one word."""
    words = text.split()
    kept = [
        word for word, drop in zip(words, rng.random(len(words)) < rate, strict=True) if not drop
    ]
    return " ".join(kept or words[:1])


def _swap_words(text: str, rate: float, rng: np.random.Generator) -> str:
    """``rate`` x words random pairs of words trade places."""
    words = text.split()
    for _ in range(int(rate * len(words)) if len(words) > 1 else 0):
        i, j = rng.choice(len(words), size=2, replace=False)
        words[i], words[j] = words[j], words[i]
    return " ".join(words)
