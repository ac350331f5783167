"""``classifier.json``, the settings saved beside a classifier's weights, read as one checked file.

``save_classifier`` writes it; ``read_classifier_file`` checks it as a whole before any weight
is loaded: the envelope here (format, task, head), the ``inference`` block as
``InferenceSettings``, and what no single part shows: the parts must describe the same
model. An evidence model relabelled ``criteria`` would write a malformed CSV, and a head cut
to 3 labels would end in a long traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpo.models.inference import FORMULATIONS, InferenceSettings, InvalidClassifierFile, task_of

FILE_NAME = "classifier.json"


class _Strict(BaseModel):
    # strict: "128" is not a max_length and true is not a label count; unknown keys are typos
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class HeadFile(_Strict):
    """``HeadConfig`` as saved."""

    pooling: Literal["cls", "mean"]
    hidden_layers: int = Field(ge=0, le=3)
    hidden_size: int = Field(ge=1)
    activation: Literal["gelu", "relu", "tanh", "silu"]
    dropout: float = Field(ge=0, lt=1)
    num_labels: int = Field(ge=1)


class _Envelope(_Strict):
    format: Literal[1]
    task: Literal["criteria", "evidence"]
    head: HeadFile
    inference: dict[str, Any]  # read by InferenceSettings.from_json
    # a LoRA model's base encoder; the folder holds only the adapter
    base_encoder: str | None = None


@dataclass(frozen=True)
class ClassifierFile:
    task: str
    head: HeadFile
    inference: InferenceSettings
    base_encoder: str | None


def read_classifier_file(meta: dict) -> ClassifierFile:
    """``meta`` (classifier.json, parsed) checked as a whole; raises ``InvalidClassifierFile``."""
    try:
        envelope = _Envelope.model_validate(meta)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(map(str, error["loc"])) or "top level"
        problem = "unknown key" if error["type"] == "extra_forbidden" else error["msg"].lower()
        shown = (
            f" (got {error['input']!r})"
            if isinstance(error["input"], (str, int, float, type(None)))
            else ""
        )
        raise InvalidClassifierFile(field, problem + shown) from None
    saved = ClassifierFile(
        envelope.task,
        envelope.head,
        InferenceSettings.from_json(envelope.inference),
        envelope.base_encoder,
    )
    _check_consistent(saved)
    return saved


def read_inference(folder: str | Path) -> InferenceSettings:
    """The checked inference block of the classifier saved in ``folder``."""
    return read_classifier_file(
        json.loads((Path(folder) / FILE_NAME).read_text(encoding="utf-8"))
    ).inference


def _check_consistent(saved: ClassifierFile) -> None:
    """What no single part shows: the parts must describe the same model."""
    block = saved.inference
    if block.formulation not in FORMULATIONS[saved.task]:
        raise InvalidClassifierFile(
            "task",
            f"{saved.task!r} does not fit inference.formulation "
            f"{block.formulation!r} (a {task_of(block.formulation)} model)",
        )
    # pairs and evidence: one logit
    outputs = len(block.labels) if block.formulation == "multilabel" else 1
    if saved.head.num_labels != outputs:
        raise InvalidClassifierFile(
            "head.num_labels",
            f"{saved.head.num_labels}, but a {block.formulation} model "
            f"with {len(block.labels)} labels has {outputs} output(s)",
        )


__all__ = [
    "FILE_NAME",
    "ClassifierFile",
    "HeadFile",
    "InvalidClassifierFile",
    "read_classifier_file",
    "read_inference",
]
