"""``classifier.json``, the settings saved beside a classifier's weights, as one checked schema.

Training writes it (``save_classifier`` with ``loop._inference_settings``); prediction reads it
through ``read_classifier_file`` before any weight is loaded. An edited file is refused with the
field it breaks: a negative ``max_length`` would change every probability silently, an evidence
model relabelled ``criteria`` would write a malformed CSV, and a head cut to 3 labels would end
in a long traceback.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpo.errors import UsageError

FORMULATIONS = {"criteria": ("pairs", "multilabel"), "evidence": ("evidence",)}  # by task
Probability = Annotated[float, Field(ge=0, le=1)]


class InvalidClassifierFile(UsageError):
    """A classifier.json that breaks the schema; ``field`` is its dotted path."""

    def __init__(self, field: str, problem: str):
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")


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


class InferenceFile(_Strict):
    """How training turned text into model inputs, and where it decides."""

    task: Literal["criteria", "evidence"] | None = None  # repeats the file's task
    formulation: Literal["pairs", "multilabel", "evidence"]
    labels: list[str] = Field(min_length=1)  # the symptoms, in the head's column order
    max_length: int = Field(ge=1)  # tokens per sequence, as TrainConfig allows
    long_text: Literal["truncate", "head_tail", "chunks"]
    descriptions: dict[str, str] | None = None  # None: saved before descriptions were a study setting
    thresholds: dict[str, Probability]  # the decision threshold per label
    validation_thresholds: dict[str, Probability] | None = None  # tuned on validation (finalize reports both)
    # sha256 of the training data files (files_fingerprint): pairs a criteria and an evidence model.
    # None: saved before it was recorded.
    data_fingerprint: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class ClassifierFile(_Strict):
    format: Literal[1]
    task: Literal["criteria", "evidence"]
    head: HeadFile
    inference: InferenceFile
    base_encoder: str | None = None  # a LoRA model's base encoder; the folder holds only the adapter


def read_classifier_file(meta: dict) -> ClassifierFile:
    """``meta`` (classifier.json, parsed) checked as a whole; raises ``InvalidClassifierFile``."""
    try:
        saved = ClassifierFile.model_validate(meta)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(map(str, error["loc"])) or "top level"
        problem = "unknown key" if error["type"] == "extra_forbidden" else error["msg"].lower()
        shown = f" (got {error['input']!r})" if isinstance(error["input"], (str, int, float, type(None))) else ""
        raise InvalidClassifierFile(field, problem + shown) from None
    _check_consistent(saved)
    return saved


def _check_consistent(saved: ClassifierFile) -> None:
    """What no single field shows: the parts must describe the same model."""
    block, labels = saved.inference, saved.inference.labels
    if block.formulation not in FORMULATIONS[saved.task]:
        raise InvalidClassifierFile("task", f"{saved.task!r} does not fit inference.formulation "
                                            f"{block.formulation!r} (a {_task_of(block.formulation)} model)")
    if saved.task != (block.task or saved.task):
        raise InvalidClassifierFile("inference.task", f"{block.task!r}, but the file's task is {saved.task!r}")
    if len(set(labels)) != len(labels):
        raise InvalidClassifierFile("inference.labels", "a label appears twice")
    if missing := [label for label in labels if label not in block.thresholds]:
        raise InvalidClassifierFile("inference.thresholds", f"no threshold for {', '.join(missing)}")
    if unknown := sorted(set(block.thresholds) - set(labels)):
        raise InvalidClassifierFile("inference.thresholds", f"{', '.join(unknown)} is not among inference.labels")
    outputs = len(labels) if block.formulation == "multilabel" else 1  # pairs and evidence: one yes/no logit
    if saved.head.num_labels != outputs:
        raise InvalidClassifierFile("head.num_labels", f"{saved.head.num_labels}, but a {block.formulation} model "
                                                       f"with {len(labels)} labels has {outputs} output(s)")
    if block.formulation != "multilabel" and block.descriptions is not None \
            and (missing := [label for label in labels if label not in block.descriptions]):
        raise InvalidClassifierFile("inference.descriptions", f"no description for {', '.join(missing)}")


def _task_of(formulation: str) -> str:
    return next(task for task, formulations in FORMULATIONS.items() if formulation in formulations)


__all__ = ["ClassifierFile", "InvalidClassifierFile", "read_classifier_file"]
