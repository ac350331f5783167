"""The optimizer and its parameter groups: a learning rate per depth of the encoder
(layer-wise decay), another for the head, weight decay only on weight matrices, and the
bottom of the encoder frozen on request.

Encoder layers are found by name (``….layer.N.``, as BERT, RoBERTa and DeBERTa-v2 name
them, LoRA-wrapped too), so any such encoder works without a per-architecture table.
Grouping always runs on the unwrapped model: under ``nn.DataParallel`` every name starts
with ``module.``, and matching ``head.`` there silently gave the head the encoder's rate.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from hpo.models.device import unwrap_model
from hpo.train.config import TrainConfig

_LAYER = re.compile(r"\.layers?\.(\d+)\.")


def layer_depths(model: nn.Module) -> tuple[dict[str, int | None], int]:
    """Each parameter's depth in the encoder and the number of encoder layers L.

    Depth 0 is the embeddings and whatever else the encoder holds outside its numbered
    layers (DeBERTa's relative-position embeddings and their LayerNorm serve every
    layer, so they count as the bottom); layer N (0-based in names) is depth N + 1, the
    top layer depth L; the head is None (not part of the encoder).
    """
    real = unwrap_model(model)
    depths: dict[str, int | None] = {}
    for name, _ in real.named_parameters():
        if name.startswith("head."):
            depths[name] = None
        else:
            match = _LAYER.search(name)
            depths[name] = int(match.group(1)) + 1 if match else 0
    return depths, max((d for d in depths.values() if d is not None), default=0)


def freeze_bottom(model: nn.Module, n: int) -> int:
    """Stop training the embeddings and the bottom ``n`` encoder layers (0: nothing);
    returns how many parameter tensors were frozen. Call before building the optimizer."""
    if n <= 0:
        return 0
    depths, layers = layer_depths(model)
    if n > layers:
        raise ValueError(
            f"freeze_layers={n}, but the encoder has {layers} layers; use at most {layers}"
        )
    frozen = 0
    for name, param in unwrap_model(model).named_parameters():
        if depths[name] is not None and depths[name] <= n and param.requires_grad:
            param.requires_grad_(False)
            frozen += 1
    return frozen


def param_groups(model: nn.Module, config: TrainConfig) -> list[dict]:
    """AdamW groups: learning_rate * layerwise_lr_decay ** (L - depth) in the encoder (the top
    layer at learning_rate, the embeddings lowest), head_learning_rate (or learning_rate) for
    the head; no weight decay on biases and LayerNorm weights. Frozen parameters are left out."""
    depths, layers = layer_depths(model)
    groups: dict[tuple[float, float], list[nn.Parameter]] = {}
    for name, param in unwrap_model(model).named_parameters():
        if not param.requires_grad:
            continue
        depth = depths[name]
        if depth is None:
            lr = config.head_learning_rate or config.learning_rate
        else:
            lr = config.learning_rate * config.layerwise_lr_decay ** (layers - depth)
        no_decay = param.ndim < 2  # biases and LayerNorm weights
        groups.setdefault((lr, 0.0 if no_decay else config.weight_decay), []).append(param)
    return [{"params": ps, "lr": lr, "weight_decay": wd} for (lr, wd), ps in groups.items()]


def build_optimizer(
    model: nn.Module, config: TrainConfig, device: torch.device
) -> torch.optim.AdamW:
    """After the transfer to the device: restored tensors are new Parameter objects. Fused on
    CPU too: torch's CPU default is a per-tensor loop, 5.9x slower on MiniLM's 22.7M parameters
    (146 ms against 25 ms a step on 2 cores), the same update up to float rounding."""
    return torch.optim.AdamW(
        param_groups(model, config),
        lr=config.learning_rate,
        fused=device.type in ("cuda", "cpu"),
    )
