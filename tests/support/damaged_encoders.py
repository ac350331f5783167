"""Copies of a tiny encoder with their weights damaged as real checkpoints get damaged: shared by
the tests of loading, the checks before a study, and trials that fail at run time."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def nan_encoder(encoder: Path, folder: Path) -> Path:
    """A copy of ``encoder`` whose word embeddings are NaN: a checkpoint saved by a run that
    diverged. It loads whole; its loss is NaN at the first step, however small the learning
    rate."""

    def poison(weights):
        weights["embeddings.word_embeddings.weight"].fill_(float("nan"))
        return weights

    return _rewritten(encoder, folder, poison)


def _rewritten(encoder: Path, folder: Path, change) -> Path:
    shutil.copytree(encoder, folder)
    weights = load_file(folder / "model.safetensors")
    save_file(change(weights), folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def without_layer(encoder: Path, folder: Path, prefix: str = "encoder.layer.1.") -> Path:
    """A copy of ``encoder`` whose checkpoint lacks every weight under ``prefix``."""
    return _rewritten(
        encoder,
        folder,
        lambda weights: {k: v for k, v in weights.items() if not k.startswith(prefix)},
    )


def state_dict_prefixed(encoder: Path, folder: Path) -> Path:
    """A copy whose keys carry DDP's ``module.`` prefix, as a raw ``state_dict`` saves them."""
    return _rewritten(
        encoder, folder, lambda weights: {f"module.{k}": v for k, v in weights.items()}
    )


def misshapen(
    encoder: Path, folder: Path, key: str = "encoder.layer.0.intermediate.dense.weight"
) -> Path:
    """A copy whose ``key`` has twice the rows its config.json gives it."""

    def double(weights):
        weights[key] = torch.zeros(2 * weights[key].shape[0], *weights[key].shape[1:])
        return weights

    return _rewritten(encoder, folder, double)


def truncated(encoder: Path, folder: Path) -> Path:
    """A copy whose weights file was cut short, as an interrupted copy leaves it."""
    shutil.copytree(encoder, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])
    return folder
