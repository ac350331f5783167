"""Data for a run: corpus → task examples → grouped split → tokenized splits.

Every step is cached in the process, so a worker's second and later trials on the same
data and tokenizer start training at once; tokenization is also cached on disk
(``cache_dir``) for workers that start later.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from hpo.data import Example, build_examples, load_descriptions, load_redsm5, split_by_post
from hpo.data.tokenize import TokenizedSplit, tokenize_pairs
from hpo.errors import DataError
from hpo.models.loading import load_tokenizer
from hpo.train.config import TrainConfig

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class PreparedSplit:
    tokens: TokenizedSplit
    post_ids: tuple[str, ...]
    criteria: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class PreparedData:
    tokenizer: object
    train: PreparedSplit
    validation: PreparedSplit
    test: PreparedSplit | None  # None when the split fractions give the test split nothing


def prepare_data(config: TrainConfig) -> PreparedData:
    tokenizer = cached_tokenizer(config.encoder)
    fingerprint, splits = _split_examples(
        str(Path(config.data_dir).resolve()), _files_stamp(config.data_dir), config.task,
        config.descriptions_path, config.split_seed, tuple(config.split_fractions),
    )
    prepared = {}
    for name in SPLITS:
        examples: list[Example] = getattr(splits, name)
        key = f"{config.task}|{fingerprint}|{name}|seed={config.split_seed}|{config.split_fractions}"
        if not examples:
            if name != "test":
                raise DataError(f"the {name} split is empty; use more posts or larger split_fractions")
            prepared[name] = None
            continue
        tokens = tokenize_pairs(
            tokenizer, [(e.text_a, e.text_b) for e in examples], [e.label for e in examples],
            config.max_length, cache_key=key, cache_dir=config.cache_dir,
        )
        prepared[name] = PreparedSplit(tokens, tuple(e.post_id for e in examples), tuple(e.criterion for e in examples))
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
def _split_examples(data_dir: str, _stamp: tuple, task: str, descriptions_path: str | None,
                    split_seed: int, fractions: tuple[float, ...]):
    corpus = load_redsm5(data_dir)
    descriptions = load_descriptions(descriptions_path)
    examples = build_examples(corpus, task, descriptions)
    described = hashlib.sha256(repr(sorted(descriptions.items())).encode()).hexdigest()[:12]
    return f"{corpus.fingerprint[:16]}-{described}", split_by_post(examples, fractions, seed=split_seed)
