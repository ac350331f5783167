"""What every formulation does, and the default of what most do the same way."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

from hpo.data import Corpus, Example
from hpo.data.tokenize import tokenize_pairs
from hpo.data.tokenized import TokenizedSplit
from hpo.train.config import TrainConfig
from hpo.train.step import accumulate_gradients, plan_units
from hpo.vocabulary import TRAITS, EvidenceScope, Formulation, FormulationTraits

if TYPE_CHECKING:  # a Setup holds its formulation: imported for the annotation only
    from hpo.train.setup import Setup


class BaseFormulation(ABC):
    """How a task is put to the model, from a corpus's examples to an optimizer step: one
    subclass per formulation (one module of this package), found by the name a spec or a saved
    model carries (``formulation_of``). What the data, model and saved-file layers may know of
    one are its ``traits``; what it does is here, above them."""

    name: ClassVar[Formulation]
    # its examples hold a post's sentences (``hpo.data.sentences``): split once per machine
    splits_sentences: ClassVar[bool] = False

    @property
    def traits(self) -> FormulationTraits:
        return TRAITS[self.name]

    @abstractmethod
    def examples(
        self, corpus: Corpus, descriptions: Mapping[str, str], scope: EvidenceScope | None
    ) -> list[Example]:
        """The corpus's examples, deterministically ordered (posts in file order)."""

    def evidence_scope(self, config: TrainConfig) -> EvidenceScope | None:
        """Which criteria each post's sentences are paired with; None where none are."""
        return None

    def tokenize(
        self, tokenizer, examples: Sequence[Example], config: TrainConfig, cache_key: str
    ) -> TokenizedSplit:
        """The examples as the model reads them: (first, second) text pairs, cut as
        ``long_text`` says."""
        return tokenize_pairs(
            tokenizer,
            [(e.text_a, e.text_b) for e in examples],
            [e.label for e in examples],
            config.max_length,
            cache_key=cache_key,
            cache_dir=config.cache_dir,
            long_text=config.long_text,
        )

    def sentence_evidence(
        self, examples: Sequence[Example], *, touched: bool = False
    ) -> tuple[np.ndarray, ...] | None:
        """Per example, per sentence, which symptoms it is evidence for (``touched``: which it
        touches without showing them); None where the model does not score sentences."""
        return None

    def accumulate(self, setup: Setup, batch: list[int]) -> tuple[int, torch.Tensor, int]:
        """Forward and backward over ``batch``: the micro-batch that worked, the loss, and the
        tokens the passes with a graph read. Each example's text, or a long one's chunks
        scored without a graph first to pick those that train."""
        train = setup.data.train
        units = plan_units(train.tokens, batch, train.num_labels, setup.score_chunks)
        micro, loss = accumulate_gradients(
            setup.context, train.tokens, units, len(batch), setup.micro
        )
        return micro, loss, int(train.tokens.sequence_lengths[units.sequences].sum())
