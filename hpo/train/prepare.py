"""Data for a run: corpus → one post split shared by both tasks → task examples → tokenized splits.

Every step is cached in the process, so a worker's second and later trials on the same
data and tokenizer start training at once; tokenization is also cached on disk
(``cache_dir``) for workers that start later.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np

from hpo.data import (
    PostSplit,
    kfold_posts,
    load_descriptions,
    load_redsm5,
    partition,
    share_of_train,
    split_posts,
    symptom_profiles,
)
from hpo.data.augment import augment_examples
from hpo.data.sentences import presplit
from hpo.errors import DataError
from hpo.models.tokenizer import load_tokenizer
from hpo.train.config import TrainConfig
from hpo.train.formulations import formulation_of
from hpo.train.prepared import SPLITS, PreparedData, PreparedSplit
from hpo.vocabulary import TRAIN_WITH_VALIDATION, EvidenceScope, Formulation


def prepare_data(config: TrainConfig) -> PreparedData:
    tokenizer = cached_tokenizer(config.encoder)
    formulation = formulation_of(config.formulation)
    # which examples are built: the formulation's, with the evidence scope where it has one
    scope = formulation.evidence_scope(config)
    variant = scope or config.formulation
    fingerprint, splits = _split_examples(
        str(Path(config.data_dir).resolve()),
        _files_stamp(config.data_dir),
        config.formulation,
        scope,
        config.descriptions_path,
        config.split_seed,
        tuple(config.split_fractions),
        config.cv_fold and tuple(config.cv_fold),
        config.train_share,
        config.cache_dir,
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
        prepared[name] = PreparedSplit(
            formulation.tokenize(tokenizer, examples, config, key),
            tuple(e.post_id for e in examples),
            tuple(e.criterion for e in examples),
            np.fromiter((e.annotated for e in examples), bool, len(examples)),
            config.formulation,
            formulation.sentence_evidence(examples),
            formulation.sentence_evidence(examples, touched=True),
            np.array([e.hard_negative for e in examples], np.float32).reshape(len(examples), -1),
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
    formulation: Formulation,
    scope: EvidenceScope | None,
    descriptions_path: str | None,
    split_seed: int,
    fractions: tuple[float, ...],
    cv_fold: tuple[int, int] | None = None,
    train_share: float = 1.0,
    cache_dir: str | None = None,
):
    corpus = load_redsm5(data_dir)
    descriptions = load_descriptions(descriptions_path)
    chosen = formulation_of(formulation)
    if chosen.splits_sentences and cache_dir:
        presplit([post.text for post in corpus.posts.values()], cache_dir)
    examples = chosen.examples(corpus, descriptions, scope)
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
