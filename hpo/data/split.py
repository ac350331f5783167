"""Split examples into train/validation/test by post, keeping label balance close."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from hpo.data.tasks import Example
from hpo.errors import DataError, UsageError


@dataclass(frozen=True)
class Splits:
    train: list[Example]
    validation: list[Example]
    test: list[Example]


def split_by_post(
    examples: Sequence[Example],
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    seed: int = 0,
) -> Splits:
    """Assign whole posts to splits; no post appears in two splits.

    Split sizes are counted in posts; each split with a non-zero fraction gets at least
    one post when there are enough. Posts are shuffled with ``seed``, stably sorted
    largest first (by positive, then negative examples), and each goes to the split,
    among those with posts left to take, that most lacks its kind of examples: positive
    and negative counts both end close to each split's share. Examples keep their input
    order within a split.
    """
    shares = _check_fractions(fractions)
    by_post: dict[str, list[int]] = {}
    for example in examples:
        by_post.setdefault(example.post_id, []).append(example.label)
    if not by_post:
        raise DataError("no examples to split; build examples from a non-empty corpus first")
    counts = {
        post_id: (sum(labels), len(labels) - sum(labels)) for post_id, labels in by_post.items()
    }
    post_ids = list(counts)
    random.Random(seed).shuffle(post_ids)
    post_ids.sort(key=lambda post_id: (-counts[post_id][0], -counts[post_id][1]))
    split_of = _assign(post_ids, counts, _quotas(len(post_ids), shares), shares)
    parts: tuple[list[Example], ...] = ([], [], [])
    for example in examples:
        parts[split_of[example.post_id]].append(example)
    return Splits(*parts)


def _check_fractions(fractions: Sequence[float]) -> list[float]:
    """Return the fractions rescaled to sum to exactly 1, or raise UsageError."""
    if len(fractions) != 3:
        raise UsageError(
            f"split fractions must be three numbers (train, validation, test); got {fractions!r}"
        )
    if any(not math.isfinite(f) or f < 0 for f in fractions):
        raise UsageError(f"split fractions must be finite and >= 0; got {fractions!r}")
    if fractions[0] <= 0:
        raise UsageError(f"the train fraction must be > 0; got {fractions!r}")
    if abs(sum(fractions) - 1) > 1e-6:
        raise UsageError(f"split fractions must sum to 1; {fractions!r} sums to {sum(fractions):g}")
    return [f / sum(fractions) for f in fractions]


def _quotas(n_posts: int, shares: Sequence[float]) -> list[int]:
    """Posts per split by largest remainder, with at least one for every non-zero share."""
    exact = [share * n_posts for share in shares]
    counts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(shares)), key=lambda i: counts[i] - exact[i])
    for i in by_remainder[: n_posts - sum(counts)]:
        counts[i] += 1
    wanted = [i for i, share in enumerate(shares) if share > 0]
    if n_posts >= len(wanted):
        for i in wanted:
            if counts[i] == 0:
                counts[counts.index(max(counts))] -= 1
                counts[i] += 1
    return counts


def _assign(
    post_ids: list[str],
    counts: dict[str, tuple[int, int]],
    quotas: Sequence[int],
    shares: Sequence[float],
) -> dict[str, int]:
    """Greedily give each post to the open split whose (positive, negative) deficit it fills most."""
    totals = [sum(count[k] for count in counts.values()) for k in (0, 1)]
    held = [[0, 0] for _ in shares]
    taken = [0] * len(shares)
    split_of = {}
    for post_id in post_ids:
        post = counts[post_id]
        open_splits = [i for i in range(len(shares)) if taken[i] < quotas[i]]
        split = max(open_splits, key=lambda i: _need(shares[i], held[i], totals, post))
        split_of[post_id] = split
        taken[split] += 1
        held[split] = [held[split][k] + post[k] for k in (0, 1)]
    return split_of


def _need(share: float, held: list[int], totals: list[int], post: tuple[int, int]) -> float:
    """How much of what the split still lacks, relative to its share, this post supplies."""
    return sum((share * totals[k] - held[k]) * post[k] for k in (0, 1)) / share
