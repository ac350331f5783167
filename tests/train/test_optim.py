"""Optimizer groups on tiny real encoders: layer-wise learning-rate decay, freezing the
bottom layers, and the head's own learning rate, under nn.DataParallel too."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hpo.models.classifier import build_classifier
from hpo.models.settings import LoraSettings
from hpo.train.config import TrainConfig
from hpo.train.optim import build_optimizer, freeze_bottom, layer_depths, param_groups

CPU = torch.device("cpu")


def _config(encoder, **overrides) -> TrainConfig:
    return TrainConfig(task="criteria", encoder=str(encoder), data_dir="unused", **overrides)


def _lr_of(model: nn.Module, groups: list[dict]) -> dict[str, float]:
    by_param = {id(p): group["lr"] for group in groups for p in group["params"]}
    real = model.module if isinstance(model, nn.DataParallel) else model
    return {name: by_param[id(p)] for name, p in real.named_parameters() if id(p) in by_param}


def test_layer_depths_find_every_encoder_layer(tiny_encoder):
    model = build_classifier("criteria", tiny_encoder)
    depths, layers = layer_depths(model)
    assert layers == 2  # the tiny encoders have two layers
    assert all(depths[n] is None for n in depths if n.startswith("head."))
    assert {depths[n] for n in depths if "embeddings.word_embeddings" in n} == {0}
    assert {depths[n] for n in depths if ".layer.1." in n} == {2}


def test_layerwise_decay_lowers_the_rate_with_depth_and_leaves_the_head(tiny_encoder):
    model = build_classifier("criteria", tiny_encoder)
    config = _config(
        tiny_encoder, learning_rate=1e-3, head_learning_rate=5e-3, layerwise_lr_decay=0.5
    )
    lrs = _lr_of(model, param_groups(model, config))
    assert {lr for n, lr in lrs.items() if ".layer.1." in n} == {1e-3}  # the top layer: lr
    assert {lr for n, lr in lrs.items() if ".layer.0." in n} == {5e-4}  # halving is exact in binary
    assert {lr for n, lr in lrs.items() if "embeddings.word_embeddings" in n} == {2.5e-4}
    assert {lr for n, lr in lrs.items() if n.startswith("head.")} == {5e-3}


def test_no_decay_is_one_rate_for_the_encoder(tiny_roberta):
    model = build_classifier("criteria", tiny_roberta)
    lrs = _lr_of(model, param_groups(model, _config(tiny_roberta, learning_rate=1e-3)))
    assert set(lrs.values()) == {1e-3}
    assert len(lrs) == len(list(model.parameters()))


def test_freezing_stops_the_embeddings_and_bottom_layers(tiny_encoder):
    model = build_classifier("criteria", tiny_encoder)
    assert freeze_bottom(model, 1) > 0
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert not any("embeddings" in n or ".layer.0." in n for n in trained)
    assert any(".layer.1." in n for n in trained) and any(n.startswith("head.") for n in trained)
    lrs = _lr_of(model, param_groups(model, _config(tiny_encoder)))
    assert set(lrs) == trained  # frozen parameters are not in the optimizer


def test_freezing_more_layers_than_the_encoder_has_is_an_error(tiny_roberta):
    with pytest.raises(ValueError, match="has 2 layers"):
        freeze_bottom(build_classifier("criteria", tiny_roberta), 3)


def test_layers_are_found_under_lora(tiny_roberta):
    model = build_classifier("criteria", tiny_roberta, lora=LoraSettings(r=4, alpha=8))
    depths, layers = layer_depths(model)
    assert layers == 2
    assert {depths[n] for n in depths if "lora_A" in n and ".layer.0." in n} == {1}


def test_the_head_gets_its_rate_under_data_parallel(tiny_roberta):
    # module.head.* under the wrapper: grouping by the wrapper's names gave the head the encoder's
    # rate
    model = nn.DataParallel(build_classifier("criteria", tiny_roberta))
    config = _config(tiny_roberta, learning_rate=1e-4, head_learning_rate=1e-2)
    optimizer = build_optimizer(model, config, CPU)
    lrs = _lr_of(model, optimizer.param_groups)
    heads = {lr for n, lr in lrs.items() if n.startswith("head.")}
    assert heads == {1e-2}
    assert {lr for n, lr in lrs.items() if not n.startswith("head.")} == {1e-4}
    assert len(lrs) == len(list(model.parameters()))


def test_attention_dropout_reaches_the_encoder_config(tiny_encoder):
    model = build_classifier("criteria", tiny_encoder, encoder_dropout=0.3, attention_dropout=0.05)
    assert model.config.hidden_dropout_prob == 0.3
    assert model.config.attention_probs_dropout_prob == 0.05


def test_adamw_is_fused_on_cpu_and_steps_as_the_per_tensor_loop_did(tiny_roberta):
    # the per-tensor loop (torch's CPU default) was a sixth of a bf16 step; fused is one pass
    torch.manual_seed(0)
    model = build_classifier("criteria", tiny_roberta)
    config = _config(tiny_roberta, learning_rate=1e-3, weight_decay=0.01)
    fused = build_optimizer(model, config, CPU)
    assert fused.defaults["fused"] is True
    twin = build_classifier("criteria", tiny_roberta)
    twin.load_state_dict(model.state_dict())
    loop = torch.optim.AdamW(param_groups(twin, config), lr=config.learning_rate)
    for _ in range(3):
        for m, opt in ((model, fused), (twin, loop)):
            for p in m.parameters():
                p.grad = torch.full_like(p, 0.01) + p.detach() * 0.1
            opt.step()
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
