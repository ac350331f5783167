"""A run's data as training reads it: per split, its tokenized examples and what each is of."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpo.data import SYMPTOMS
from hpo.data.tokenized import TokenizedSplit
from hpo.vocabulary import TRAITS, Formulation, FormulationTraits, Task

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class PreparedSplit:
    tokens: TokenizedSplit
    post_ids: tuple[str, ...]  # per example
    criteria: tuple[str, ...]  # per example; "" for a multilabel example (all nine)
    annotated: np.ndarray  # per example: False for an evidence sentence no annotator labelled
    formulation: Formulation  # TrainConfig.formulation
    # whole_post: per example (post), per sentence, one 0/1 per symptom: is it evidence for it
    evidence: tuple[np.ndarray, ...] | None = None
    # likewise, 0/1: does it touch the symptom without showing it (a status-0 annotation)
    touched: tuple[np.ndarray, ...] | None = None
    # criteria: per example, one 0/1 per label: a symptom touched but not shown (hard negative)
    hard_negatives: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def traits(self) -> FormulationTraits:
        return TRAITS[self.formulation]

    @property
    def task(self) -> Task:
        return self.traits.task

    @property
    def num_labels(self) -> int:
        return len(SYMPTOMS) if self.traits.per_post else 1

    def training_sample(self, negative_ratio: float | None, seed: int) -> np.ndarray:
        """The examples one epoch trains on: all of them, or every annotated one plus
        ``negative_ratio`` times as many unannotated ones, drawn anew per ``seed``."""
        everything = np.arange(len(self))
        if negative_ratio is None or self.annotated.all():
            return everything
        annotated, others = everything[self.annotated], everything[~self.annotated]
        keep = min(len(others), round(negative_ratio * len(annotated)))
        drawn = np.random.default_rng(seed).choice(others, size=keep, replace=False)
        return np.sort(np.concatenate([annotated, drawn]))


@dataclass(frozen=True)
class PreparedData:
    tokenizer: object
    train: PreparedSplit
    validation: PreparedSplit
    test: PreparedSplit | None  # None when the split fractions give the test split nothing
