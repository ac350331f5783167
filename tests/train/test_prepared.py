"""A run's split as training reads it: what its formulation makes of it, and the examples an
epoch trains on when unannotated evidence sentences are subsampled."""

from __future__ import annotations

import numpy as np
import pytest

from hpo.data import SYMPTOMS
from hpo.data.tokenized import TokenizedSplit
from hpo.train.prepared import PreparedSplit


def split(formulation: str, annotated: list[bool]) -> PreparedSplit:
    n = len(annotated)
    tokens = TokenizedSplit(
        input_ids=[np.array([0, 5 + i, 2]) for i in range(n)],
        token_type_ids=None,
        offsets=np.arange(n + 1),
        labels=np.zeros(n),
        text_tokens=np.ones(n, np.int64),
        seen_tokens=np.ones(n, np.int64),
    )
    ids = tuple(f"p{i}" for i in range(n))
    return PreparedSplit(tokens, ids, ("FATIGUE",) * n, np.array(annotated), formulation)


def test_the_formulation_says_the_task_and_the_labels_per_example():
    assert (split("pairs", [True]).task, split("pairs", [True]).num_labels) == ("criteria", 1)
    assert (split("evidence", [True]).task, split("evidence", [True]).num_labels) == (
        "evidence",
        1,
    )
    assert split("multilabel", [True]).num_labels == len(SYMPTOMS)
    assert split("whole_post", [True]).num_labels == len(SYMPTOMS)
    assert len(split("pairs", [True, False, True])) == 3


def test_an_epoch_trains_on_every_annotated_example_and_a_share_of_the_others():
    annotated = [True] * 4 + [False] * 20
    evidence = split("evidence", annotated)
    assert evidence.training_sample(None, seed=0).tolist() == list(range(24))
    drawn = evidence.training_sample(2.0, seed=0)
    assert drawn.tolist() == sorted(drawn.tolist()) and len(set(drawn.tolist())) == 12
    assert set(range(4)) <= set(drawn.tolist())  # every annotated one, and 2 x 4 others
    assert np.array_equal(drawn, evidence.training_sample(2.0, seed=0))
    other_epoch = evidence.training_sample(2.0, seed=1)
    assert len(other_epoch) == 12 and not np.array_equal(drawn, other_epoch)
    assert len(evidence.training_sample(100.0, seed=0)) == 24  # no more than there are


@pytest.mark.parametrize("ratio", [None, 0.5, 3.0])
def test_a_split_with_every_example_annotated_trains_on_all(ratio):
    assert split("pairs", [True] * 5).training_sample(ratio, seed=0).tolist() == list(range(5))
