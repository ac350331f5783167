"""A tokenized split: unpadded token ids per sequence, in memory and on disk.

On disk it is plain ``.npy`` arrays in one folder, written aside and renamed into place (workers
race for it) and loaded with ``allow_pickle=False``: a shared cache directory must never be a
way to run code in a worker. Nor a way to train on other data: a digest of the arrays is written
beside them and checked on every load, and the labels read back must be the very labels of the
examples asked for (the caller holds them), so an edited or planted folder is never trained on.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# beside the arrays, an array itself (the folder stays plain .npy): a digest of the others
DIGEST = "sha256"


@dataclass(frozen=True)
class TokenizedSplit:
    """Unpadded token ids of one split; batches are padded later, per batch.

    An example is one or more sequences (several only with ``chunks``); ``offsets[i]`` is
    its first sequence, so an example's sequences are ``offsets[i]:offsets[i + 1]``.
    """

    input_ids: list[np.ndarray]  # per sequence
    # per sequence; None when the tokenizer does not produce them
    token_type_ids: list[np.ndarray] | None
    offsets: np.ndarray  # per example + 1
    labels: np.ndarray  # per example: (n,) or (n, labels) for multilabel
    text_tokens: np.ndarray  # per example: tokens of its (second) text, uncut
    seen_tokens: np.ndarray  # per example: of those, how many some sequence holds
    # whole_post: per sequence, per token, which sentence of its example the token belongs to
    # (-1: a special token); a sequence holds whole sentences in order, or a piece of one
    segments: list[np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.labels)

    # read by every training step and scoring pass: computed once per split
    @functools.cached_property
    def lengths(self) -> np.ndarray:
        """Per example, the tokens of all its sequences: the cost batching plans with."""
        return (
            np.add.reduceat(self.sequence_lengths, self.offsets[:-1])
            if len(self)
            else np.zeros(0, np.int64)
        )

    @functools.cached_property
    def sequence_lengths(self) -> np.ndarray:
        return np.fromiter(
            (len(ids) for ids in self.input_ids), dtype=np.int64, count=len(self.input_ids)
        )

    @property
    def coverage(self) -> float:
        """The share of the texts' tokens the model sees."""
        return float(self.seen_tokens.sum() / max(self.text_tokens.sum(), 1))

    def sequences(self, examples: Sequence[int]) -> tuple[list[dict[str, np.ndarray]], list[int]]:
        """Model inputs of ``examples``' sequences, in order, and how many each example has."""
        ranges = [range(int(self.offsets[i]), int(self.offsets[i + 1])) for i in examples]
        return self.features([j for span in ranges for j in span]), [len(span) for span in ranges]

    def features(self, sequence_ids: Sequence[int]) -> list[dict[str, np.ndarray]]:
        """Model inputs of single sequences (of any examples), in order."""
        features = []
        for j in sequence_ids:
            ids = self.input_ids[j]
            feature = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            if self.token_type_ids is not None:
                feature["token_type_ids"] = self.token_type_ids[j]
            if self.segments is not None:  # the sequence's own sentences, counted from 0
                segment = self.segments[j]
                feature["sentence_index"] = np.where(
                    segment >= 0, segment - self.first_sentence[j], -1
                )
            features.append(feature)
        return features

    @functools.cached_property
    def first_sentence(self) -> np.ndarray:
        """Per sequence, the first sentence of its example that it holds (whole_post)."""
        return np.array([segment[segment >= 0].min() for segment in self.segments], np.int64)

    @functools.cached_property
    def sentences_per_sequence(self) -> np.ndarray:
        """Per sequence, how many sentences (or pieces of one) it holds (whole_post)."""
        return np.array(
            [
                segment.max() - first + 1
                for segment, first in zip(self.segments, self.first_sentence, strict=True)
            ],
            np.int64,
        )

    def example_of_sequence(self) -> np.ndarray:
        """Per sequence, the example it belongs to."""
        return self._example_of_sequence

    @functools.cached_property
    def _example_of_sequence(self) -> np.ndarray:
        return np.repeat(np.arange(len(self)), np.diff(self.offsets))

    def sentence_rows(self, sequence_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """whole_post: the sentences ``sequence_ids`` hold, in order (a sequence's first to its
        last): per row the example and which of its sentences it is. A sentence cut across
        two sequences has a row in each."""
        sequence_ids = np.asarray(sequence_ids, dtype=np.int64)
        counts = self.sentences_per_sequence[sequence_ids]
        starts = np.repeat(self.first_sentence[sequence_ids], counts)
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.repeat(self._example_of_sequence[sequence_ids], counts), starts + within


def save_tokenized(folder: Path, split: TokenizedSplit) -> None:
    """Written aside, then renamed into place: a worker never reads a half-written folder."""
    arrays = {
        "input_ids": np.concatenate(split.input_ids),
        "sequence_offsets": np.concatenate([[0], np.cumsum(split.sequence_lengths)]),
        "offsets": split.offsets,
        "labels": split.labels,
        "text_tokens": split.text_tokens,
        "seen_tokens": split.seen_tokens,
    }
    if split.token_type_ids is not None:
        arrays["token_type_ids"] = np.concatenate(split.token_type_ids)
    if split.segments is not None:
        arrays["segments"] = np.concatenate(split.segments)
    staging = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")  # workers race
    staging.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        np.save(staging / f"{name}.npy", array, allow_pickle=False)
    digest = np.frombuffer(bytes.fromhex(arrays_digest(arrays)), np.uint8)
    np.save(staging / f"{DIGEST}.npy", digest, allow_pickle=False)
    try:
        staging.rename(folder)
    except OSError:  # another worker got there first with the same content
        shutil.rmtree(staging, ignore_errors=True)


def arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over every array's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def load_tokenized(folder: Path, labels: np.ndarray) -> TokenizedSplit:
    """The cached split of the examples whose ``labels`` these are, checked: against the digest
    written with it, the labels against ``labels``, the arrays against each other. A damaged,
    edited or planted folder raises ValueError instead of being trained on."""
    arrays = {f.stem: np.load(f, allow_pickle=False) for f in folder.glob("*.npy")}
    recorded = arrays.pop(DIGEST, None)
    if recorded is None:
        raise ValueError(f"no {DIGEST}.npy (written by an earlier hpo, or not by hpo)")
    if recorded.tobytes().hex() != arrays_digest(arrays):
        raise ValueError(f"its arrays do not match their {DIGEST}.npy: changed since written")
    if not np.array_equal(arrays["labels"], labels):
        raise ValueError("its labels are not the labels of the examples it is cached for")
    n_examples = len(labels)
    ids, bounds, offsets = arrays["input_ids"], arrays["sequence_offsets"], arrays["offsets"]
    types, segments = arrays.get("token_type_ids"), arrays.get("segments")
    n_sequences = len(bounds) - 1
    per_example = [arrays[name] for name in ("labels", "text_tokens", "seen_tokens")]
    if (
        any(len(array) != n_examples for array in per_example)
        or len(offsets) != n_examples + 1
        or offsets[0] != 0
        or offsets[-1] != n_sequences
        or np.any(np.diff(offsets) < 1)
        or bounds[0] != 0
        or bounds[-1] != len(ids)
        or np.any(np.diff(bounds) < 1)
        or (types is not None and len(types) != len(ids))
        or (segments is not None and len(segments) != len(ids))
    ):
        raise ValueError(f"arrays do not fit {n_examples} examples")
    return TokenizedSplit(
        input_ids=np.split(ids, bounds[1:-1]),
        token_type_ids=None if types is None else np.split(types, bounds[1:-1]),
        offsets=offsets,
        labels=per_example[0],
        text_tokens=per_example[1],
        seen_tokens=per_example[2],
        segments=None if segments is None else np.split(segments, bounds[1:-1]),
    )


def discard_tokenized(folder: Path) -> None:
    """Move aside first, so a worker reading it meanwhile never sees a half-deleted folder."""
    doomed = folder.with_name(f"{folder.name}.{os.getpid()}.damaged")
    try:
        folder.rename(doomed)
    except OSError:  # another worker moved it already
        return
    shutil.rmtree(doomed, ignore_errors=True)
