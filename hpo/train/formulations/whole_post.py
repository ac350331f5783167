"""criteria read sentence by sentence: every sentence of a post scored for the nine symptoms
and pooled into the post's score, trained on the post's labels and, with the sentence loss, on
its evidence sentences (``hpo.train.posts``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from hpo.data import MULTILABEL, SYMPTOMS, Corpus, Example
from hpo.data.tasks import aligned_posts, shown, touched_only
from hpo.data.tokenized import TokenizedSplit
from hpo.data.windows import tokenize_posts
from hpo.train.config import TrainConfig
from hpo.train.formulations._base import BaseFormulation

if TYPE_CHECKING:
    from hpo.train.setup import Setup


class WholePost(BaseFormulation):
    name = "whole_post"
    splits_sentences = True

    def examples(self, corpus: Corpus, descriptions: Mapping[str, str], scope) -> list[Example]:
        present, hard = shown(corpus), touched_only(corpus)
        examples = []
        for post, sentences, statuses, _ in aligned_posts(corpus):
            evidence, touched = (_marked(statuses, len(sentences), status) for status in (1, 0))
            examples.append(
                Example(
                    post.post_id,
                    MULTILABEL,
                    None,
                    post.text,
                    tuple(int((post.post_id, symptom) in present) for symptom in SYMPTOMS),
                    sentences=tuple(sentence.text for sentence in sentences) or (post.text,),
                    evidence=evidence or ((0,) * len(SYMPTOMS),),
                    touched=touched or ((0,) * len(SYMPTOMS),),
                    hard_negative=tuple(int((post.post_id, s) in hard) for s in SYMPTOMS),
                )
            )
        return examples

    def tokenize(
        self, tokenizer, examples: Sequence[Example], config: TrainConfig, cache_key: str
    ) -> TokenizedSplit:
        """Each post, as its sentences, in windows of whole sentences (``hpo.data.windows``)."""
        return tokenize_posts(
            tokenizer,
            [e.sentences for e in examples],
            [e.label for e in examples],
            config.max_length,
            cache_key=cache_key,
            cache_dir=config.cache_dir,
        )

    def sentence_evidence(
        self, examples: Sequence[Example], *, touched: bool = False
    ) -> tuple[np.ndarray, ...]:
        return tuple(
            np.asarray(e.touched if touched else e.evidence, dtype=np.int8) for e in examples
        )

    def accumulate(self, setup: Setup, batch: list[int]) -> tuple[int, torch.Tensor, int]:
        # here, not at the top: posts needs transformers' model classes (~2 s to import), which
        # the checks before a study (hpo validate, hpo tune's start) look a formulation up without
        from hpo.train.posts import SentenceLoss, accumulate_post_gradients

        config = setup.config
        return accumulate_post_gradients(
            setup.context,
            setup.data.train,
            batch,
            len(batch),
            setup.micro,
            SentenceLoss(config.evidence_loss_weight, config.hard_negative_weight),
            setup.score_windows,
        )


def _marked(statuses: Mapping[int, Mapping[str, int]], n: int, status: int) -> tuple:
    """Per sentence, per symptom: 1 where its (highest) annotation of it has ``status``."""
    return tuple(
        tuple(int(statuses.get(i, {}).get(symptom) == status) for symptom in SYMPTOMS)
        for i in range(n)
    )
