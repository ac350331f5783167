"""A loaded classifier on new texts, read as training read its data: the ``Predictor`` (and an
ensemble of them); ``_folder`` loads one from a model folder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from hpo.data.collate import Collator
from hpo.data.sentences import split_sentences
from hpo.data.tokenize import tokenize_pairs
from hpo.data.windows import tokenize_posts
from hpo.errors import UsageError
from hpo.models.device import forward_keys
from hpo.models.inference import InferenceSettings
from hpo.train.config import CPU_INFERENCE_TOKENS
from hpo.train.evaluate import split_probabilities, split_scores
from hpo.train.posts import PostScores

DEFAULT_BATCH_SIZE = 64  # sequences per forward pass, as TrainConfig.eval_batch_size
DEFAULT_TOP_K = 3  # evidence sentences kept per post and symptom
BLOCK_BATCHES = 8  # examples are tokenized and scored about this many batches at a time
Progress = Callable[[int], None]  # called with the number of posts just finished


@dataclass(frozen=True)
class CriteriaPredictions:
    labels: tuple[str, ...]  # the symptoms, in column order
    probabilities: np.ndarray  # (posts, labels)
    # (posts, labels), bool: probability >= the model's threshold for that symptom
    decisions: np.ndarray


@dataclass(frozen=True)
class ScoredSentence:
    rank: int  # 1 = the highest score of this post and symptom
    index: int  # the sentence's position among the post's sentences
    text: str
    score: float
    decision: bool  # score >= the model's threshold for the symptom
    start: int  # the sentence is post[start:end] (split_sentences' span)
    end: int


class Predictor:
    """A loaded classifier in eval mode on its device, with the settings it was trained with."""

    def __init__(
        self, model: torch.nn.Module, tokenizer, settings: InferenceSettings, device: torch.device
    ):
        self.model, self.tokenizer, self.settings, self.device = (
            model.eval(),
            tokenizer,
            settings,
            device,
        )
        # in column order
        self.thresholds = np.array([settings.thresholds[label] for label in settings.labels])
        self.collate = Collator(
            tokenizer.pad_token_id,
            pad_to_multiple_of=8 if device.type == "cuda" else None,
            keep_keys=forward_keys(model),
        )  # as training pads

    @property
    def task(self) -> str:
        return self.settings.task

    def predict(
        self,
        texts: Sequence[str],
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: Progress | None = None,
    ) -> CriteriaPredictions:
        """Per text, each symptom's probability and decision (criteria models)."""
        self._require("criteria", texts)
        labels = self.settings.labels
        if self.settings.traits.per_post:
            probs = self._by_post(texts, lambda text: [(None, text)], batch_size, progress)
        else:  # one (criterion, post) pair per symptom, in label order
            firsts = [self.settings.descriptions[label] for label in labels]
            probs = self._by_post(
                texts, lambda text: [(first, text) for first in firsts], batch_size, progress
            )
        probabilities = (
            np.stack([p.reshape(-1) for p in probs]) if probs else np.zeros((0, len(labels)))
        )
        return CriteriaPredictions(labels, probabilities, probabilities >= self.thresholds)

    def predict_evidence(
        self,
        posts: Sequence[str],
        top_k: int | None = DEFAULT_TOP_K,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: Progress | None = None,
        symptoms: Sequence[Sequence[str]] | None = None,
    ) -> list[dict[str, list[ScoredSentence]]]:
        """Per post and symptom, its ``top_k`` sentences (all with None) by evidence score.

        ``symptoms``: per post, the symptoms to score (a criteria model's findings); None:
        every sentence against all nine, since a new post's criteria are not known here
        (training may have paired posts only with the criteria they show). A whole_post
        criteria model ranks by its own sentence scores: one reading of each post for both."""
        if self.settings.traits.scores_sentences:
            if isinstance(posts, str):
                raise TypeError("pass a list of texts, not one string")
        else:
            self._require("evidence", posts)
        labels, descriptions = self.settings.labels, self.settings.descriptions
        wanted = [labels] * len(posts) if symptoms is None else self._symptoms(symptoms, len(posts))
        sentences = [split_sentences(post) for post in posts]
        if self.settings.traits.scores_sentences:
            scored = self._by_post(
                range(len(posts)),
                lambda i: [posts[i]],
                batch_size,
                progress,
                length=lambda i: len(posts[i]),
                score=self.sentence_scores,
            )
            columns = [[labels.index(label) for label in wanted[i]] for i in range(len(posts))]
            return [  # one example per post: its sentence table
                self._top(sentences[i], wanted[i], table[:, columns[i]], top_k)
                for i, (table,) in enumerate(scored)
            ]
        scored = self._by_post(
            range(len(posts)),
            lambda i: [
                (descriptions[label], sentence.text)
                for sentence in sentences[i]
                for label in wanted[i]
            ],
            batch_size,
            progress,
            length=lambda i: len(posts[i]),
        )
        return [
            self._top(
                sentences[i], wanted[i], scores.reshape(len(sentences[i]), len(wanted[i])), top_k
            )
            for i, scores in enumerate(scored)
        ]

    def _symptoms(self, symptoms: Sequence[Sequence[str]], posts: int) -> list[tuple[str, ...]]:
        if len(symptoms) != posts:
            raise UsageError(
                f"symptoms names {len(symptoms)} posts' symptoms for {posts} posts; "
                "give one list per post"
            )
        known = set(self.settings.labels)
        if unknown := sorted({label for wanted in symptoms for label in wanted} - known):
            raise UsageError(
                f"unknown symptom(s) {', '.join(unknown)}; use {', '.join(self.settings.labels)}"
            )
        return [
            tuple(label for label in self.settings.labels if label in chosen)
            for chosen in map(set, symptoms)
        ]

    def _top(
        self, sentences: list, labels: Sequence[str], scores: np.ndarray, top_k: int | None
    ) -> dict[str, list[ScoredSentence]]:
        top = {}
        for column, label in enumerate(labels):
            threshold = self.settings.thresholds[label]
            order = np.argsort(-scores[:, column], kind="stable")[:top_k]
            top[label] = [
                ScoredSentence(
                    rank,
                    int(i),
                    sentences[i].text,
                    float(scores[i, column]),
                    bool(scores[i, column] >= threshold),
                    sentences[i].start,
                    sentences[i].end,
                )
                for rank, i in enumerate(order, start=1)
            ]
        return top

    def _by_post(
        self,
        posts: Sequence,
        examples: Callable,
        batch_size: int,
        progress: Progress | None,
        length: Callable = len,
        score: Callable | None = None,
    ) -> list[np.ndarray]:
        """Each post's example probabilities, flattened in ``examples(post)`` order.

        Posts go longest first, in blocks of about ``BLOCK_BATCHES`` batches of examples (nine
        per post for pairs, nine per sentence for evidence): each block's length-sorted batches
        then waste as little padding as one sort over everything would, memory stays bounded,
        and the progress bar moves every few batches whatever the formulation. ``score``
        (examples, batch size) -> one array per example, or ``self.score``'s rows."""
        if batch_size < 1:
            raise UsageError(f"batch size must be at least 1, got {batch_size}")
        out: list[np.ndarray] = [np.zeros(0)] * len(posts)
        block: list[tuple[int, list]] = []  # (post, its examples)

        def flush() -> None:
            pairs = [pair for _, examples_of in block for pair in examples_of]
            if pairs:
                probs = (score or self.score)(pairs, batch_size)
                bounds = np.cumsum([0] + [len(examples_of) for _, examples_of in block])
                for (i, _), first, last in zip(block, bounds[:-1], bounds[1:], strict=True):
                    out[i] = probs[first:last]
            if progress is not None:
                progress(len(block))
            block.clear()

        pending = 0
        for i in sorted(range(len(posts)), key=lambda i: -length(posts[i])):
            block.append((i, examples(posts[i])))
            pending += len(block[-1][1])
            if pending >= batch_size * BLOCK_BATCHES:
                flush()
                pending = 0
        if block:
            flush()
        return out

    def score(
        self, pairs: Sequence[tuple[str | None, str]], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> np.ndarray:
        """Probabilities of (criterion, text) pairs, or (None, text) for multilabel and
        whole_post: (pairs, labels). In float32 whatever training's mixed precision: these are
        the reference numbers."""
        if self.settings.traits.scores_sentences:
            return self._post_scores([text for _, text in pairs], batch_size).probs
        tokens = tokenize_pairs(
            self.tokenizer,
            pairs,
            np.zeros(len(pairs), np.int64),
            self.settings.max_length,
            cache_key=None,
            long_text=self.settings.long_text,
        )
        # as training's evaluation reads
        budget = CPU_INFERENCE_TOKENS if self.device.type == "cpu" else None
        return split_probabilities(
            self.model, tokens, self.collate, batch_size, self.device, max_tokens=budget
        )

    def sentence_scores(self, texts: Sequence[str], batch_size: int) -> list[np.ndarray]:
        """whole_post: per text, per sentence (``split_sentences``) each label's probability
        that the sentence states it; a sentence without a token scores 0."""
        scores = self._post_scores(texts, batch_size)
        posts, sentences, probs = scores.per_sentence()
        found = []
        for i, text in enumerate(texts):
            table = np.zeros((len(split_sentences(text)), len(self.settings.labels)))
            rows = (posts == i) & (sentences < len(table))  # a text of no sentence: none
            table[sentences[rows]] = probs[rows]
            found.append(table)
        return found

    def _post_scores(self, texts: Sequence[str], batch_size: int) -> PostScores:
        """whole_post: each text read as training read its posts, every sentence scored."""
        tokens = tokenize_posts(
            self.tokenizer,
            [[sentence.text for sentence in split_sentences(text)] or [text] for text in texts],
            np.zeros((len(texts), len(self.settings.labels)), np.int64),
            self.settings.max_length,
            cache_key=None,
        )
        budget = CPU_INFERENCE_TOKENS if self.device.type == "cpu" else None
        return split_scores(
            self.model, tokens, self.collate, batch_size, self.device, max_tokens=budget
        )

    def _require(self, task: str, texts: Sequence[str]) -> None:
        if isinstance(texts, str):  # a str is a Sequence too: it would be scored letter by letter
            raise TypeError("pass a list of texts, not one string")
        if self.task != task:
            other = "predict_evidence" if task == "criteria" else "predict"
            raise UsageError(f"this is a {self.task} model; call {other}() instead")


class EnsemblePredictor(Predictor):
    """Saved classifiers as one model: each scores the examples its own way, their
    probabilities are averaged, and the ensemble decides at its own thresholds."""

    def __init__(self, members: Sequence[Predictor], settings: InferenceSettings):
        self.members, self.settings, self.device = list(members), settings, members[0].device
        self.thresholds = np.array([settings.thresholds[label] for label in settings.labels])

    def score(
        self, pairs: Sequence[tuple[str | None, str]], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> np.ndarray:
        return np.mean([member.score(pairs, batch_size) for member in self.members], axis=0)

    def sentence_scores(self, texts: Sequence[str], batch_size: int) -> list[np.ndarray]:
        per_member = [member.sentence_scores(texts, batch_size) for member in self.members]
        return [np.mean(tables, axis=0) for tables in zip(*per_member, strict=True)]
