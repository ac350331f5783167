"""LoRA adapters and multi-GPU trials, on CPU: adapters and head train while the base
stays frozen, checkpoints hold only the adapters and reload exactly, wrappers stay safe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from hpo.data.collate import Collator
from hpo.errors import UsageError
from hpo.fixtures import write_sample
from hpo.models.classifier import build_classifier, load_classifier, save_classifier
from hpo.models.device import forward_keys, safe_to_device, unwrap_model
from hpo.models.loading import find_meta_tensors
from hpo.models.settings import LoraSettings
from hpo.models.tokenizer import load_tokenizer
from hpo.run.launcher import worker_launches
from hpo.train.config import TrainConfig
from hpo.train.evaluate import split_probabilities
from hpo.train.loop import train
from hpo.train.prepare import prepare_data
from tests.support import REPO

pytest.importorskip("peft")


def _inputs(tokenizer):
    enc = tokenizer(
        ["Depressed mood most of the day.", "Insomnia or hypersomnia."],
        ["I have felt empty for weeks.", "I slept fine."],
        padding=True,
        return_tensors="pt",
    )
    return dict(enc), torch.tensor([1, 0])


def test_only_adapters_and_head_train(tiny_encoder):
    model = build_classifier("evidence", tiny_encoder, lora=LoraSettings(r=4, alpha=8, dropout=0.0))
    model = safe_to_device(model, "cpu", checkpoint=tiny_encoder)
    inputs, labels = _inputs(load_tokenizer(tiny_encoder))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(2):
        nn.functional.binary_cross_entropy_with_logits(
            model(**inputs).squeeze(-1), labels.float()
        ).backward()
        optimizer.step()
        optimizer.zero_grad()
    changed = {n for n, p in model.named_parameters() if not torch.equal(before[n], p)}
    assert changed and all("lora_" in n or n.startswith("head.") for n in changed), changed
    assert any(n.startswith("head.") for n in changed) and any("lora_B" in n for n in changed)
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen and all("lora_" not in n for n in frozen), (
        "base weights are frozen, adapters are not"
    )


class _StridedLinear(nn.Module):
    """A base layer whose output is a non-contiguous view, as some kernels (and
    DataParallel's scatter) produce: the case that broke reshapes after ``base + lora``."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.linear = linear
        self.weight, self.bias = linear.weight, linear.bias

    def forward(self, x):
        return self.linear(x).transpose(0, 1).contiguous().transpose(0, 1)


def test_adapted_layers_return_contiguous_tensors(tiny_roberta):
    from peft.tuners.lora import LoraLayer

    from hpo.models.adapters import _contiguous_outputs

    model = build_classifier(
        "criteria", tiny_roberta, lora=LoraSettings(r=4, target_modules="query,value")
    )
    layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
    assert len(layers) == 2 * model.encoder.config.num_hidden_layers
    layer = layers[0]
    layer.base_layer = _StridedLinear(layer.base_layer)
    x = torch.randn(3, 5, model.encoder.config.hidden_size)
    assert layer(x).is_contiguous()
    layer._forward_hooks.clear()  # without the hook the same layer hands on a strided tensor
    assert not layer(x).is_contiguous()
    _contiguous_outputs(model)
    assert layer(x).is_contiguous()


def test_lora_checkpoint_holds_only_adapters_and_reloads_exactly(tiny_encoder, tmp_path):
    model = build_classifier("criteria", tiny_encoder, lora=LoraSettings(r=4, dropout=0.0))
    tokenizer = load_tokenizer(tiny_encoder)
    with torch.no_grad():  # move adapters and head off their initial values
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    save_classifier(nn.DataParallel(model), tmp_path, tokenizer)
    assert not (tmp_path / "encoder").exists(), "the frozen base is referenced, not copied"
    adapter = load_file(tmp_path / "adapter" / "adapter_model.safetensors")
    assert adapter and all("lora_" in k for k in adapter)
    loaded, loaded_tokenizer = load_classifier(tmp_path)
    assert find_meta_tensors(loaded) == []
    inputs, _ = _inputs(loaded_tokenizer)
    model.eval(), loaded.eval()
    with torch.no_grad():
        assert torch.equal(model(**inputs), loaded(**inputs))


def test_a_lora_model_refuses_a_base_encoder_other_than_its_own(tiny_roberta, tmp_path):
    """The folder holds only the adapter: another checkpoint at the base's path changed every
    prediction, exit 0, without a word."""
    import shutil

    from hpo.fixtures import make_tiny_encoder
    from hpo.models.classifier_file import ModelFolderChanged

    base = shutil.copytree(tiny_roberta, tmp_path / "base")
    model = build_classifier("criteria", base, lora=LoraSettings(r=4, dropout=0.0))
    save_classifier(model, tmp_path / "model", load_tokenizer(base))
    load_classifier(tmp_path / "model")  # its own base: loads
    make_tiny_encoder("roberta", base, seed=7, force=True)  # same shapes, other weights
    with pytest.raises(ModelFolderChanged, match="is not the one its adapter was trained on"):
        load_classifier(tmp_path / "model")


@pytest.mark.slow
def test_lora_trial_end_to_end(tiny_roberta, tmp_path):
    data_dir = write_sample(tmp_path / "data", posts=40, seed=5)
    config = TrainConfig(
        task="evidence",
        encoder=str(tiny_roberta),
        data_dir=str(data_dir),
        epochs=2,
        max_length=64,
        learning_rate=5e-3,
        adapter="lora",
        lora_r=4,
        checkpoint_dir=str(tmp_path / "out" / "checkpoint"),
        mixed_precision="no",
    )
    result = train(config)
    assert (
        result.checkpoint and (Path(result.checkpoint) / "adapter" / "adapter_config.json").exists()
    )
    model, tokenizer = load_classifier(result.checkpoint)
    base = load_file(Path(tiny_roberta) / "model.safetensors")
    state = {
        k.replace("base_model.model.", "").replace(".base_layer", ""): v
        for k, v in model.encoder.state_dict().items()
    }
    assert all(torch.equal(state[k], v) for k, v in base.items() if k in state), (
        "the base encoder never changed"
    )


def test_data_parallel_wrapped_model_predicts_and_saves(tiny_roberta, tmp_path):
    data_dir = write_sample(tmp_path / "data", posts=20, seed=6)
    config = TrainConfig(
        task="evidence", encoder=str(tiny_roberta), data_dir=str(data_dir), max_length=64
    )
    data = prepare_data(config)
    model = build_classifier("evidence", tiny_roberta, lora=LoraSettings(r=4))
    wrapped = nn.DataParallel(model)
    collate = Collator(data.tokenizer.pad_token_id, keep_keys=forward_keys(wrapped))
    probs = split_probabilities(wrapped, data.validation.tokens, collate, 16, torch.device("cpu"))
    assert probs.shape == (len(data.validation), 1) and ((probs >= 0) & (probs <= 1)).all()
    assert (
        unwrap_model(wrapped) is model
        and unwrap_model(model.encoder) is model.encoder.get_base_model()
    )
    save_classifier(wrapped, tmp_path / "ckpt", data.tokenizer)
    assert (
        isinstance(wrapped, nn.DataParallel) and (tmp_path / "ckpt" / "head.safetensors").exists()
    )


def test_meta_base_weights_behind_adapters_are_restored_from_the_checkpoint(tiny_roberta):
    model = build_classifier("criteria", tiny_roberta, lora=LoraSettings(r=4))
    query = model.encoder.get_base_model().encoder.layer[0].attention.self.query.base_layer
    expected = query.weight.detach().clone()
    query.weight = nn.Parameter(torch.empty_like(query.weight, device="meta"), requires_grad=False)
    safe_to_device(model, "cpu", checkpoint=tiny_roberta)
    assert torch.equal(query.weight, expected) and not query.weight.requires_grad


@pytest.mark.slow
def test_gpus_per_trial_without_gpus_fails_clearly(tiny_roberta, tmp_path):
    data_dir = write_sample(tmp_path / "data", posts=20, seed=7)
    with pytest.raises(UsageError, match="gpus_per_trial=2"):
        train(
            TrainConfig(
                task="evidence",
                encoder=str(tiny_roberta),
                data_dir=str(data_dir),
                max_length=64,
                gpus_per_trial=2,
            )
        )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpo",
            "validate",
            str(REPO / "studies" / "evidence-smoke.yaml"),
            "--set",
            f"data_dir={data_dir}",
            "--set",
            f"model_paths.tiny-roberta={tiny_roberta}",
            "--set",
            f"model_paths.tiny-deberta={tiny_roberta}",
            "--set",
            "train.gpus_per_trial=2",
        ],
        capture_output=True,
        text=True,
        env={"CUDA_VISIBLE_DEVICES": "", **_env()},
    )
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "gpus_per_trial=2 needs 2 GPUs" in run.stderr


def _env():
    import os

    return {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}


def test_launcher_hands_each_worker_a_gpu_group():
    launches = worker_launches(
        "s.yaml",
        3,
        storage="sqlite:///x.db",
        cpu_count=16,
        gpu_ids=["0", "1", "2", "3"],
        gpus_per_trial=2,
        base_env={},
    )
    assert [w.env["CUDA_VISIBLE_DEVICES"] for w in launches] == ["0,1", "2,3", "0,1"]
