"""Criteria and evidence classifiers on both architectures: train a step, right logits,
DataParallel, and a safetensors round trip."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from hpo.models.classifier import (
    CriteriaClassifier,
    EvidenceClassifier,
    HeadConfig,
    build_classifier,
    load_classifier,
    save_classifier,
)
from hpo.models.device import safe_to_device
from hpo.models.loading import find_meta_tensors
from hpo.models.tokenizer import load_tokenizer


def _batch(tokenizer, n=4):
    pairs = [
        ("Depressed mood most of the day.", "I have felt empty and hopeless for weeks."),
        ("Insomnia or hypersomnia.", "I slept fine."),
        ("Fatigue or loss of energy.", "Every morning I am exhausted before I even start."),
        ("Diminished ability to think.", "I walked the dog."),
    ][:n]
    enc = tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    return dict(enc), torch.tensor([1, 0, 1, 0][:n])


@pytest.mark.parametrize("task", ["criteria", "evidence"])
@pytest.mark.parametrize(
    "head",
    [HeadConfig(), HeadConfig(pooling="mean", hidden_layers=3, hidden_size=32, activation="relu")],
)
def test_trains_one_step_with_right_logits(tiny_encoder, task, head):
    model = build_classifier(task, tiny_encoder, head)
    assert isinstance(model, CriteriaClassifier if task == "criteria" else EvidenceClassifier)
    model = safe_to_device(model, "cpu", checkpoint=tiny_encoder)
    tokenizer = load_tokenizer(tiny_encoder)
    inputs, labels = _batch(tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    logits = model(**inputs)
    assert logits.shape == (4, 1)  # one logit: BCE
    nn.functional.binary_cross_entropy_with_logits(logits.squeeze(-1), labels.float()).backward()
    optimizer.step()
    changed = {n for n, p in model.named_parameters() if not torch.equal(before[n], p)}
    assert any(n.startswith("encoder.") for n in changed), "the encoder must be fine-tuned"
    assert any(n.startswith("head.") for n in changed)


def test_encoder_dropout_override_reaches_the_encoder(tiny_roberta):
    model = build_classifier("criteria", tiny_roberta, encoder_dropout=0.3)
    assert model.encoder.config.hidden_dropout_prob == 0.3
    assert model.encoder.embeddings.dropout.p == 0.3


def test_data_parallel_trains_and_saves(tiny_roberta, tmp_path):
    model = nn.DataParallel(build_classifier("evidence", tiny_roberta))
    model = safe_to_device(model, "cpu")
    tokenizer = load_tokenizer(tiny_roberta)
    inputs, labels = _batch(tokenizer, n=2)
    nn.functional.binary_cross_entropy_with_logits(
        model(**inputs).squeeze(-1), labels.float()
    ).backward()
    save_classifier(model, tmp_path / "ckpt", tokenizer)
    assert isinstance(model, nn.DataParallel), "saving must not unwrap the caller's reference"
    assert json.loads((tmp_path / "ckpt" / "classifier.json").read_text())["task"] == "evidence"


def test_save_load_round_trip_gives_identical_logits(tiny_encoder, tmp_path):
    model = build_classifier("criteria", tiny_encoder, HeadConfig(hidden_layers=1, hidden_size=16))
    tokenizer = load_tokenizer(tiny_encoder)
    with torch.no_grad():  # move the head away from its init so the round trip is tested
        for p in model.head.parameters():
            p.add_(0.5)
    save_classifier(model, tmp_path, tokenizer)
    assert (tmp_path / "head.safetensors").exists() and (
        tmp_path / "encoder" / "model.safetensors"
    ).exists()
    assert not list(tmp_path.rglob("*.bin")) and not list(tmp_path.rglob("*.pt")), "nothing pickled"
    loaded, loaded_tokenizer = load_classifier(tmp_path)
    assert isinstance(loaded, CriteriaClassifier) and loaded.head_config == model.head_config
    assert find_meta_tensors(loaded) == []
    inputs, _ = _batch(loaded_tokenizer)
    model.eval(), loaded.eval()
    with torch.no_grad():
        assert torch.equal(model(**inputs), loaded(**inputs))


@pytest.mark.parametrize(
    "bad", [dict(pooling="max"), dict(hidden_layers=4), dict(activation="swish")]
)
def test_head_config_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        HeadConfig(**bad)
