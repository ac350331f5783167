"""train_share: a low-fidelity run trains on a share of the training posts (their examples
with them) while validation and test stay whole."""

from __future__ import annotations

import dataclasses

from hpo.fixtures import write_sample
from hpo.train.config import TrainConfig
from hpo.train.prepare import prepare_data


def test_a_share_of_the_training_posts_keeps_validation_and_test_whole(tiny_roberta, tmp_path):
    sample_dir = write_sample(tmp_path, posts=80, seed=5)
    whole = TrainConfig(
        task="criteria", encoder=str(tiny_roberta), data_dir=str(sample_dir), max_length=64,
        criteria_formulation="pairs",
    )  # fmt: skip
    full = prepare_data(whole)
    quarter = prepare_data(dataclasses.replace(whole, train_share=0.25))
    posts = set(full.train.post_ids)
    kept = set(quarter.train.post_ids)
    assert kept < posts and len(kept) == round(0.25 * len(posts))
    assert len(quarter.train) == 9 * len(kept)  # every kept post's nine pairs, no other's
    for name in ("validation", "test"):
        assert getattr(quarter, name).post_ids == getattr(full, name).post_ids, name
