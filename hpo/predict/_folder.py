"""How a model folder is read: its checked settings without a weight, then the classifier (or
ensemble of them) loaded as training loads models, as a ``Predictor``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from safetensors import SafetensorError

from hpo.data import load_descriptions
from hpo.errors import UsageError
from hpo.models.classifier import load_classifier_on
from hpo.models.classifier_file import (
    InvalidClassifierFile,
    check_integrity,
    read_classifier_file,
)
from hpo.models.ensemble_file import ENSEMBLE_FILE, is_ensemble, read_ensemble
from hpo.models.hardware import resolve_device
from hpo.models.inference import InferenceSettings
from hpo.models.limits import position_limit
from hpo.predict._model import EnsemblePredictor, Predictor


class NotAModel(UsageError):
    """A folder that is not a classifier ``save_classifier`` wrote, or one prediction cannot use."""


def _check_fits(path: Path, settings: InferenceSettings, model: torch.nn.Module) -> None:
    """max_length within the positions the encoder has: past them, the first long post
    would end in an IndexError deep inside the embeddings."""
    limit = position_limit(model.config)
    if limit is not None and settings.max_length > limit:
        raise NotAModel(
            f"{path}: not a valid classifier.json: "
            f"inference.max_length {settings.max_length} is more "
            f"than the encoder reads ({limit} tokens); save the model again with hpo rather than "
            "editing the file"
        )


def read_settings(path: str | Path) -> InferenceSettings:
    """The checked ``inference`` block of the classifier (or ensemble) saved at ``path``,
    without loading any weight: enough to tell whether two models fit together before either
    costs time."""
    return _read_model(Path(path))[1]


def _read_model(path: Path) -> tuple[list[Path] | None, InferenceSettings]:
    """An ensemble's member folders (None for one classifier) and the checked settings. A
    model saved before the criterion texts travelled with it gets the packaged ones, which
    its training used."""
    ensemble = is_ensemble(path)
    try:
        if ensemble:
            members, settings = read_ensemble(path)
        else:
            meta = _read_meta(path)
            members, settings = None, read_classifier_file(meta).inference
            # once the file is valid, is it as saved? (loading checks the weights too)
            check_integrity(path, meta, weights=False)
    except InvalidClassifierFile as exc:
        raise NotAModel(
            f"{path}: not a valid {ENSEMBLE_FILE if ensemble else 'classifier.json'}: {exc}; save "
            "the model again with hpo (retrain or re-finalize) rather than editing the file"
        ) from None
    if settings.descriptions is None:
        settings = dataclasses.replace(settings, descriptions=load_descriptions())
    return members, settings


def load_classifier(path: str | Path, device: str = "auto") -> Predictor:
    """The classifier (or ensemble of them) saved at ``path``, loaded as training loads
    models, on ``device`` (auto: a GPU when there is one)."""
    path = Path(path)
    members, settings = _read_model(path)
    if members is not None:
        return EnsemblePredictor([load_classifier(m, device) for m in members], settings)
    target = _device(device)
    try:
        model, tokenizer = load_classifier_on(path, target)
    except (OSError, ValueError, SafetensorError) as exc:
        raise NotAModel(f"{path}: cannot load the saved model ({_first_line(exc)})") from None
    _check_fits(path, settings, model)
    return Predictor(model, tokenizer, settings, target)


def _read_meta(path: Path) -> dict:
    """classifier.json, once the folder is known to hold every part of a saved classifier:
    naming what is missing beats a long traceback from deep inside transformers."""
    if not path.is_dir():
        what = "a file, not a folder" if path.exists() else "no such folder"
        raise NotAModel(
            f"{path}: {what}; pass a model folder (a trial's checkpoint/ or finalize's model)"
        )
    if not (path / "classifier.json").is_file():
        raise NotAModel(
            f"{path}: no classifier.json, so not a saved classifier; pass a trial's checkpoint/ "
            "folder or finalize's model folder"
        )
    encoder = "adapter" if (path / "adapter").is_dir() else "encoder"
    missing = [
        name for name in (encoder, "head.safetensors", "tokenizer") if not (path / name).exists()
    ]
    if missing:
        raise NotAModel(
            f"{path}: incomplete model folder, missing {', '.join(missing)}; copy the whole folder"
        )
    try:
        meta = json.loads((path / "classifier.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotAModel(
            f"{path}: cannot read classifier.json ({exc}); pass a folder save_classifier wrote"
        ) from None
    if not isinstance(meta, dict):
        raise NotAModel(
            f"{path}: classifier.json is not an object; pass a folder save_classifier wrote"
        )
    return meta


def _device(name: str) -> torch.device:
    try:
        device = resolve_device(name)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda"):  # meta, mps, xla...: not here
        raise UsageError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            f"device {name!r} asked for, but this machine has no usable GPU; "
            "use --device cpu or auto"
        )
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise UsageError(
            f"device {name!r} asked for, but this process sees {torch.cuda.device_count()} GPU(s)"
        )
    return device


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
