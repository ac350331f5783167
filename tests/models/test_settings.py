"""Model settings as plain data: a classifier's head and its LoRA adapter, checked when built
(strictly: "8" is not a width, true not a count)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hpo.models.settings import HeadConfig, LoraSettings


@pytest.mark.parametrize(
    "bad", [dict(pooling="max"), dict(hidden_layers=4), dict(activation="swish")]
)
def test_head_config_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        HeadConfig(**bad)


@pytest.mark.parametrize(
    "bad",
    [
        dict(hidden_size="8"),
        dict(hidden_layers=True),
        dict(num_labels=0),
        dict(dropout=1.0),
        dict(post_pooling="mean"),
        dict(width=8),
    ],
)
def test_a_head_setting_of_the_wrong_kind_is_refused_not_coerced(bad):
    with pytest.raises(ValidationError):
        HeadConfig(**bad)


def test_attention_pooling_gives_each_label_a_gate_beside_its_logit():
    assert HeadConfig(num_labels=9).outputs == 9
    assert HeadConfig(num_labels=9, post_pooling="max").outputs == 9
    assert HeadConfig(num_labels=9, post_pooling="attention").outputs == 18


@pytest.mark.parametrize(
    ("target_modules", "targets"),
    [
        (None, None),
        ("all-linear", "all-linear"),
        ("query, value", ["query", "value"]),
        ("query,,key ,", ["query", "key"]),
    ],
)
def test_lora_targets_are_peft_default_all_linear_or_a_list_of_names(target_modules, targets):
    assert LoraSettings(target_modules=target_modules).target_list() == targets


def test_lora_refuses_a_rank_or_alpha_below_one_and_a_dropout_of_one():
    for bad in (dict(r=0), dict(alpha=0), dict(dropout=1.0)):
        with pytest.raises(ValidationError):
            LoraSettings(**bad)
