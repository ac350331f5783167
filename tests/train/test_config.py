"""TrainConfig: one trial's settings, checked when built, and what they default to where a
machine decides (the token budget on a CPU or a GPU)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hpo.train.config import TrainConfig


def test_micro_batch_tokens_is_1024_on_cpu_and_unbounded_on_gpus_by_default():
    from hpo.train.config import TrainConfig

    config = TrainConfig(task="criteria", encoder="e", data_dir="d")
    assert config.token_budget("cpu") == 1024 and config.token_budget("cuda") is None
    assert (
        TrainConfig(
            task="criteria", encoder="e", data_dir="d", micro_batch_tokens=None
        ).token_budget("cpu")
        is None
    )
    with pytest.raises(ValidationError) as refused:
        TrainConfig(task="criteria", encoder="e", data_dir="d", micro_batch_tokens=0)
    assert refused.value.errors()[0]["loc"][0] == "micro_batch_tokens"


@pytest.mark.parametrize(
    "bad",
    [
        dict(layerwise_lr_decay=0.0),
        dict(layerwise_lr_decay=1.5),
        dict(freeze_layers=-1),
        dict(attention_dropout=1.0),
    ],
)
def test_train_config_rejects_bad_breadth_settings(bad):
    with pytest.raises(ValueError):
        TrainConfig(task="criteria", encoder="x", data_dir="unused", **bad)
