"""What an encoder's config lets a run ask of it, read from the config alone: the rule
hpo validate checks a search space with and hpo predict checks a saved model with."""

from __future__ import annotations

from transformers import AutoConfig

from hpo.models.limits import layer_count, position_limit


def test_roberta_positions_start_after_the_padding_index(tiny_roberta):
    config = AutoConfig.from_pretrained(tiny_roberta)
    assert config.max_position_embeddings == 514 and config.pad_token_id == 1
    assert position_limit(config) == 512
    assert layer_count(config) == 2


def test_relative_positions_set_no_limit(tiny_deberta):
    config = AutoConfig.from_pretrained(tiny_deberta)
    assert position_limit(config) is None
    assert layer_count(config) == 2
