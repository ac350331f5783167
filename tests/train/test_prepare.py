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


def test_the_formulations_that_read_sentences_split_the_posts_once_per_cache(
    tiny_roberta, tmp_path
):
    """evidence and whole_post leave the posts' sentences in cache_dir for the next worker
    (hpo.data.sentences.presplit); the criteria formulations that read whole texts split
    nothing."""
    sample_dir = write_sample(tmp_path / "data", posts=40, seed=6)

    def split_files(task: str, **settings) -> list:
        cache = tmp_path / f"cache-{task}-{'-'.join(map(str, settings.values()))}"
        prepare_data(
            TrainConfig(
                task=task,
                encoder=str(tiny_roberta),
                data_dir=str(sample_dir),
                max_length=64,
                cache_dir=str(cache),
                **settings,
            )  # fmt: skip
        )
        return list(cache.glob("sentences-*.npy"))

    assert len(split_files("evidence")) == 1
    assert len(split_files("criteria", criteria_formulation="whole_post")) == 1
    assert split_files("criteria", criteria_formulation="multilabel") == []
    assert split_files("criteria", criteria_formulation="pairs") == []
