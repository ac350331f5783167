"""Data for a run: corpus → one post split shared by both tasks → task examples → tokenized splits.

Every step is cached in the process, so a worker's second and later trials on the same
data and tokenizer start training at once; tokenization is also cached on disk
(``cache_dir``) for workers that start later.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpo.data import (
    SYMPTOMS,
    PostSplit,
    build_examples,
    kfold_posts,
    load_descriptions,
    load_redsm5,
    partition,
    share_of_train,
    split_posts,
    symptom_profiles,
)
from hpo.data.augment import augment_examples
from hpo.data.tokenize import tokenize_pairs
from hpo.data.tokenized import TokenizedSplit
from hpo.data.windows import tokenize_posts
from hpo.errors import DataError
from hpo.models.tokenizer import load_tokenizer
from hpo.train.config import TrainConfig
from hpo.vocabulary import POST_FORMULATIONS, TRAIN_WITH_VALIDATION, Formulation, Task

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

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def num_labels(self) -> int:
        return len(SYMPTOMS) if self.formulation in POST_FORMULATIONS else 1

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


def prepare_data(config: TrainConfig) -> PreparedData:
    tokenizer = cached_tokenizer(config.encoder)
    # which examples are built: the criteria formulation, or the evidence scope
    variant = config.evidence_scope if config.task == "evidence" else config.formulation
    fingerprint, splits = _split_examples(
        str(Path(config.data_dir).resolve()),
        _files_stamp(config.data_dir),
        config.task,
        variant,
        config.descriptions_path,
        config.split_seed,
        tuple(config.split_fractions),
        config.cv_fold and tuple(config.cv_fold),
        config.train_share,
    )
    prepared = {}
    for name in SPLITS:
        examples = getattr(splits, name)
        key = (
            f"{config.task}|{variant}|{fingerprint}|{name}|"
            f"seed={config.split_seed}|{config.split_fractions}"
        )
        if name == "train" and config.train_share < 1:
            key += f"|share={config.train_share}"
        if config.cv_fold and name != "test":
            key += f"|fold={config.cv_fold[1]}of{config.cv_fold[0]}"
        if name == "train" and config.train_on == TRAIN_WITH_VALIDATION:
            examples, key = [*examples, *splits.validation], key + "+validation"
        if name == "train" and config.augmentation != "none":  # never validation or test
            examples = augment_examples(
                examples, config.augmentation, config.augmentation_rate, config.seed
            )
            key += f"|{config.augmentation}={config.augmentation_rate}|seed={config.seed}"
        if not examples:
            if name != "test":
                raise DataError(
                    f"the {name} split is empty; use more posts or larger split_fractions"
                )
            prepared[name] = None
            continue
        whole_post = config.formulation == "whole_post"
        if whole_post:
            tokens = tokenize_posts(
                tokenizer,
                [e.sentences for e in examples],
                [e.label for e in examples],
                config.max_length,
                cache_key=key,
                cache_dir=config.cache_dir,
            )
        else:
            tokens = tokenize_pairs(
                tokenizer,
                [(e.text_a, e.text_b) for e in examples],
                [e.label for e in examples],
                config.max_length,
                cache_key=key,
                cache_dir=config.cache_dir,
                long_text=config.long_text,
            )
        prepared[name] = PreparedSplit(
            tokens,
            tuple(e.post_id for e in examples),
            tuple(e.criterion for e in examples),
            np.fromiter((e.annotated for e in examples), bool, len(examples)),
            config.formulation,
            tuple(np.asarray(e.evidence, dtype=np.int8) for e in examples) if whole_post else None,
        )
    return PreparedData(tokenizer, **prepared)


@functools.lru_cache(maxsize=4)
def cached_tokenizer(name_or_path: str):
    """One tokenizer object per encoder and process: loading one (DeBERTa's converts
    its SentencePiece model) costs far more than a trial's set-up may."""
    return load_tokenizer(name_or_path)


def _files_stamp(data_dir: str) -> tuple:
    """Changes when a data file changes, so the cache below never serves stale data."""
    stamps = []
    for path in sorted(Path(data_dir).glob("*.csv")):
        stat = path.stat()
        stamps.append((path.name, stat.st_size, stat.st_mtime_ns))
    return tuple(stamps)


@functools.lru_cache(maxsize=8)
def _split_examples(
    data_dir: str,
    _stamp: tuple,
    task: Task,
    variant: str,
    descriptions_path: str | None,
    split_seed: int,
    fractions: tuple[float, ...],
    cv_fold: tuple[int, int] | None = None,
    train_share: float = 1.0,
):
    corpus = load_redsm5(data_dir)
    descriptions = load_descriptions(descriptions_path)
    if task == "criteria":
        examples = build_examples(corpus, task, descriptions, formulation=variant)
    else:
        examples = build_examples(corpus, task, descriptions, evidence_scope=variant)
    described = hashlib.sha256(repr(sorted(descriptions.items())).encode()).hexdigest()[:12]
    # the same for both tasks
    profiles = symptom_profiles(corpus)
    posts = split_posts(profiles, fractions, seed=split_seed)
    if cv_fold:  # K folds of train + validation; test stays as the search had it
        pool = {post: profiles[post] for post in (*posts.train, *posts.validation)}
        kept, held = kfold_posts(pool, cv_fold[0], seed=split_seed)[cv_fold[1]]
        posts = PostSplit(kept, held, posts.test)
    if train_share < 1:  # the training posts left out are in no split
        posts = share_of_train(posts, profiles, train_share, seed=split_seed)
        kept = set(posts.of())
        examples = [e for e in examples if e.post_id in kept]
    return f"{corpus.fingerprint[:16]}-{described}", partition(examples, posts)
