"""Tiny classifiers saved as hpo saves a trained one, without training: a random head on the
tiny encoder, for tests of what holds whatever the weights (loading, batching, ranking, joining)."""

from __future__ import annotations

from pathlib import Path

import torch

from hpo.data import SYMPTOMS, load_descriptions
from hpo.models.classifier import HeadConfig, build_classifier, save_classifier
from hpo.models.inference import InferenceSettings
from hpo.models.tokenizer import load_tokenizer


def save_untrained(
    encoder: Path, folder: Path, task: str, thresholds: dict[str, float], seed: int = 0
) -> Path:
    """A multilabel criteria model (chunks of 32 tokens) or an evidence model, its head drawn
    from ``seed``, deciding at ``thresholds``."""
    torch.manual_seed(seed)
    criteria = task == "criteria"
    model = build_classifier(task, encoder, HeadConfig(num_labels=9 if criteria else 1))
    settings = InferenceSettings(
        formulation="multilabel" if criteria else "evidence",
        labels=tuple(SYMPTOMS),
        max_length=32 if criteria else 96,
        long_text="chunks" if criteria else "truncate",
        thresholds=thresholds,
        descriptions=load_descriptions(),
        data_fingerprint="ab" * 32,
    )
    return save_classifier(model, folder, load_tokenizer(encoder), settings)
