"""What an encoder's config lets a run ask of it: the longest sequence its position embeddings
cover and how many layers it has. Read from the config alone (``AutoConfig``, no weights), so
``hpo validate`` checks a search space against every encoder it can choose before a trial runs,
and ``hpo predict`` checks a saved model's settings by the same rule; and whether it is an
encoder at all."""

from __future__ import annotations


def position_limit(config) -> int | None:
    """The longest sequence an encoder's absolute position embeddings cover; None: relative
    positions only (DeBERTa-v3), no fixed limit. Past it, the first long text ends in an
    IndexError deep inside the embeddings."""
    if not getattr(config, "position_biased_input", True) or not getattr(
        config, "max_position_embeddings", None
    ):
        return None
    if "roberta" in config.model_type:  # RoBERTa's positions start after the padding index
        return config.max_position_embeddings - config.pad_token_id - 1
    return config.max_position_embeddings


def layer_count(config) -> int | None:
    """The encoder's layers (what ``freeze_layers`` counts); None where the config does not
    say (configs name it ``num_hidden_layers``, or map their own name to it)."""
    layers = getattr(config, "num_hidden_layers", None)
    return layers if isinstance(layers, int) else None


def not_an_encoder(config) -> str | None:
    """Why a config is not an encoder's, or None: a decoder-only model (GPT-2, Llama) reads
    left to right, so its first token, which ``pooling: cls`` reads, sees nothing of the post,
    and an encoder-decoder's forward wants decoder inputs. Its model type has no masked-LM
    class: encoders have one (BERT, RoBERTa, DeBERTa, ELECTRA, ModernBERT)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if getattr(config, "is_encoder_decoder", False):
        return "an encoder-decoder, whose forward wants decoder inputs"
    kind = config.model_type
    if kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "decoder-only: each token sees only the text before it, so the first sees none"
    return None
