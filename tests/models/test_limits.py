"""What an encoder's config lets a run ask of it, read from the config alone: the rule
hpo validate checks a search space with and hpo predict checks a saved model with."""

from __future__ import annotations

import pytest
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


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("GPT2Config", "decoder-only"),
        ("LlamaConfig", "decoder-only"),
        ("T5Config", "an encoder-decoder"),
        ("BertConfig", None),
        ("RobertaConfig", None),
        ("DebertaV2Config", None),
        ("ElectraConfig", None),
    ],
)
def test_only_an_encoder_is_taken_for_one(config, said):
    """A tiny GPT-2 passed validate and finished a study: with cls pooling every post was the
    same vector to the head (its first token sees nothing after it)."""
    import transformers

    from hpo.models.limits import not_an_encoder

    why = not_an_encoder(getattr(transformers, config)())
    assert (why is None) if said is None else why.startswith(said)
