"""One assignment of posts to train/validation/test (or K folds), shared by both tasks.

Posts are the unit: every example of a post lands in the post's split, so no post is in
one task's training set and the other's test set. Assignment is stratified on each post's
multi-label symptom profile by iterative stratification (Sechidis et al., 2011; the
``iterative-stratification`` package, scikit-learn's splitter API: scikit-learn's own
stratifiers take one class per sample), seeded, and independent of the task.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hpo.data.redsm5 import SYMPTOMS, Corpus
from hpo.data.tasks import Example
from hpo.errors import DataError, UsageError


@dataclass(frozen=True)
class PostSplit:
    """Post ids per split, each in file order."""

    train: tuple[str, ...]
    validation: tuple[str, ...]
    test: tuple[str, ...]

    def require(self, names: Sequence[str], fractions: Sequence[float], why: str = "") -> None:
        """Raise DataError naming the first of ``names`` (split names) left without posts;
        ``why`` says what needs it."""
        for name in names:
            if not getattr(self, name):
                posts = len(self.train) + len(self.validation) + len(self.test)
                raise DataError(
                    f"the {name} split is empty ({posts} posts, "
                    f"split_fractions {list(fractions)}){why}; "
                    "use more posts or give that split a larger fraction"
                )

    def of(self) -> dict[str, str]:
        """post id -> split name."""
        return {
            post: name for name in ("train", "validation", "test") for post in getattr(self, name)
        }


@dataclass(frozen=True)
class Splits:
    train: list[Example]
    validation: list[Example]
    test: list[Example]


def symptom_profiles(corpus: Corpus) -> dict[str, frozenset[str]]:
    """post id -> the symptoms it shows (a status-1 annotation), for every post in file order."""
    shown: dict[str, set[str]] = {post_id: set() for post_id in corpus.posts}
    for a in corpus.annotations:
        if a.status == 1 and a.symptom in SYMPTOMS:
            shown[a.post_id].add(a.symptom)
    return {post_id: frozenset(symptoms) for post_id, symptoms in shown.items()}


def split_posts(
    profiles: Mapping[str, frozenset[str]],
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
) -> PostSplit:
    """Assign posts to train/validation/test, sized by ``fractions`` (counted in posts; a split
    with a non-zero fraction gets at least one post) and stratified on the symptom profile."""
    shares = _check_fractions(fractions)
    if not profiles:
        raise DataError("no posts to split; the corpus is empty")
    posts = np.arange(len(profiles))
    _, n_validation, n_test = _quotas(len(posts), shares)
    labels = _label_matrix(profiles)
    rest, test = _take(posts, labels, n_test, seed)
    train, validation = _take(rest, labels, n_validation, seed)
    ids = list(profiles)
    return PostSplit(*(tuple(ids[i] for i in sorted(part)) for part in (train, validation, test)))


def kfold_posts(
    profiles: Mapping[str, frozenset[str]], k: int, seed: int = 0
) -> list[tuple[tuple[str, ...], ...]]:
    """K (train, held-out) pairs of post ids, stratified on the symptom profile, every post
    held out exactly once."""
    posts = list(profiles)
    if not 2 <= k <= len(posts):
        raise UsageError(f"K-fold needs 2 <= K <= the number of posts ({len(posts)}); got K={k}")
    from iterstrat.ml_stratifiers import MultilabelStratifiedKFold  # scikit-learn: ~1 s to import

    folds = MultilabelStratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(
        np.zeros(len(posts)), _label_matrix(profiles)
    )
    return [
        (tuple(posts[i] for i in sorted(kept)), tuple(posts[i] for i in sorted(held)))
        for kept, held in folds
    ]


def share_of_train(
    split: PostSplit, profiles: Mapping[str, frozenset[str]], share: float, seed: int = 0
) -> PostSplit:
    """The split with only ``share`` of its training posts (at least one), drawn stratified on
    the symptom profile and fixed by ``seed``: every configuration of a low-fidelity search
    trains on the same posts, and validation and test stay whole, so scores stay comparable."""
    if share >= 1:
        return split
    train = np.array(split.train)
    labels = _label_matrix({post: profiles[post] for post in split.train})
    _, kept = _take(np.arange(len(train)), labels, max(round(share * len(train)), 1), seed)
    return PostSplit(tuple(train[np.sort(kept)]), split.validation, split.test)


def partition(examples: Sequence[Example], split: PostSplit) -> Splits:
    """The examples of each split, in their input order; an example of an unknown post is a bug."""
    of = split.of()
    parts: dict[str, list[Example]] = {"train": [], "validation": [], "test": []}
    for example in examples:
        parts[of[example.post_id]].append(example)
    return Splits(**parts)


def _label_matrix(profiles: Mapping[str, frozenset[str]]) -> np.ndarray:
    """Posts x (nine symptoms + "none"): the extra column spreads symptom-free posts evenly too."""
    return np.array(
        [[symptom in shown for symptom in SYMPTOMS] + [not shown] for shown in profiles.values()],
        dtype=np.int64,
    )


def _take(
    posts: np.ndarray, labels: np.ndarray, n: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(the rest, ``n`` posts drawn stratified) from ``posts``."""
    if n == 0:
        return posts, posts[:0]
    # imports scikit-learn (~1 s): only where posts are split, not wherever hpo.data is imported
    from iterstrat.ml_stratifiers import MultilabelStratifiedShuffleSplit

    splitter = MultilabelStratifiedShuffleSplit(n_splits=1, test_size=n, random_state=seed)
    rest, taken = next(splitter.split(np.zeros(len(posts)), labels[posts]))
    # Iterative stratification sizes splits approximately (a tiny split can come out empty):
    # move a few seeded-random posts so every split gets exactly its quota.
    rng = np.random.default_rng(seed)
    if len(taken) < n:
        moved = rng.choice(rest, size=n - len(taken), replace=False)
        rest, taken = np.setdiff1d(rest, moved), np.concatenate([taken, moved])
    elif len(taken) > n:
        moved = rng.choice(taken, size=len(taken) - n, replace=False)
        rest, taken = np.concatenate([rest, moved]), np.setdiff1d(taken, moved)
    return posts[np.sort(rest)], posts[np.sort(taken)]


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
