"""LoRA adapters (peft) on an encoder, for encoders too large to fine-tune fully per trial.

Only the adapters train; the classification head sits outside the encoder and stays fully
trainable. Every adapted layer returns a contiguous tensor: ``base + lora`` can come out
non-contiguous, and later ``view``s (and DataParallel's gather) fail on it.
"""

from __future__ import annotations

import torch
from torch import nn

from hpo.errors import UsageError
from hpo.models.loading import assert_no_meta, model_construction
from hpo.models.settings import LoraSettings


def add_lora(encoder: nn.Module, settings: LoraSettings) -> nn.Module:
    """The encoder wrapped as a peft model with trainable LoRA adapters, base weights frozen."""
    peft = _peft()
    with model_construction():
        config = peft.LoraConfig(
            r=settings.r,
            lora_alpha=settings.alpha,
            lora_dropout=settings.dropout,
            target_modules=settings.target_list(),
        )
        adapted = peft.get_peft_model(encoder, config)
    return _contiguous_outputs(adapted)


def load_lora(encoder: nn.Module, adapter_dir) -> nn.Module:
    """Saved adapters back onto their (meta-safely loaded) base encoder."""
    peft = _peft()
    with model_construction():
        adapted = peft.PeftModel.from_pretrained(encoder, adapter_dir)
    assert_no_meta(adapted, f"after loading adapters from {adapter_dir}")
    return _contiguous_outputs(adapted)


def is_lora(encoder: nn.Module) -> bool:
    return type(encoder).__name__.startswith("Peft")


def _contiguous_outputs(model: nn.Module) -> nn.Module:
    from peft.tuners.lora import LoraLayer

    for module in model.modules():
        if isinstance(module, LoraLayer):
            module.register_forward_hook(_make_contiguous)
    return model


def _make_contiguous(module, inputs, output):
    return output.contiguous() if isinstance(output, torch.Tensor) else output


def _peft():
    try:
        import peft
    except ImportError:
        raise UsageError(
            "adapter: lora needs the peft library; install it with pip install 'hpo[lora]'"
        ) from None
    return peft
