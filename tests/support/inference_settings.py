"""A classifier.json's inference block as hpo writes it, with any field changed, and a model
folder sealed as save_classifier seals one (stand-in bytes for its weights): the
InferenceSettings, classifier.json and ensemble.json tests build on them."""

from __future__ import annotations

from pathlib import Path

from hpo.data import SYMPTOMS
from hpo.models.classifier_file import write_classifier_file
from hpo.models.inference import InferenceSettings
from hpo.vocabulary import TRAITS

HALF = dict.fromkeys(SYMPTOMS, 0.5)


def settings(**changes) -> InferenceSettings:
    values = dict(
        formulation="pairs",
        labels=tuple(SYMPTOMS),
        max_length=128,
        long_text="truncate",
        thresholds=HALF,
        validation_thresholds=HALF,
        descriptions=dict.fromkeys(SYMPTOMS, "a criterion"),
        data_fingerprint="ab" * 32,
    )
    return InferenceSettings(**{**values, **changes})


HEAD = {
    "pooling": "cls",
    "hidden_layers": 0,
    "hidden_size": 8,
    "activation": "gelu",
    "dropout": 0.1,
    "num_labels": 1,
}


def sealed_folder(folder: Path, weights: bytes = b"head weights", **changes) -> Path:
    """A folder laid out as save_classifier lays one out, sealed; ``weights`` stands in for its
    head (two trainings never give the same), ``changes`` for its inference settings."""
    (folder / "encoder").mkdir(parents=True)
    (folder / "tokenizer").mkdir()
    (folder / "head.safetensors").write_bytes(weights)
    (folder / "encoder" / "model.safetensors").write_bytes(b"encoder weights")
    (folder / "tokenizer" / "vocab.json").write_text('{"a": 0}')
    inference = settings(**changes).to_json()
    head = {**HEAD, "num_labels": len(inference["labels"]) if per_post(inference) else 1}
    meta = {"format": 1, "task": inference["task"], "head": head, "inference": inference}
    write_classifier_file(folder, meta)
    return folder


def per_post(inference: dict) -> bool:
    return TRAITS[inference["formulation"]].per_post
