"""How a saved classifier reads text and where it decides: the ``inference`` block of its
``classifier.json``, as one frozen value.

Training builds it (``hpo.train.loop``) and ``save_classifier`` writes ``to_json()``;
prediction, explanation and finalize read it back with ``from_json``. It is checked once,
whenever one is built, so an edited file is refused naming the field it breaks: a negative
``max_length`` would change every probability silently, a threshold of 7 would decide
nothing, and a missing criterion text would end in a KeyError mid-prediction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields

from hpo.errors import UsageError

FORMULATIONS = {"criteria": ("pairs", "multilabel"), "evidence": ("evidence",)}  # by task
LONG_TEXT = ("truncate", "head_tail", "chunks")  # hpo.data.tokenize's, which models may not import
BLOCK = "inference"  # the block's key in classifier.json, the start of every field path
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")


class InvalidClassifierFile(UsageError):
    """A classifier.json that breaks its schema; ``field`` is the dotted path of what is wrong."""

    def __init__(self, field: str, problem: str):
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")


def task_of(formulation: str) -> str:
    return next(task for task, formulations in FORMULATIONS.items() if formulation in formulations)


@dataclass(frozen=True)
class InferenceSettings:
    """What prediction needs to treat new text as training did, and its decision thresholds."""

    formulation: str  # pairs | multilabel (criteria), evidence
    labels: tuple[str, ...]  # the symptoms, in the head's column order
    max_length: int  # tokens per sequence
    long_text: str  # what training did with a text longer than max_length (LONG_TEXT)
    thresholds: Mapping[str, float]  # the decision threshold per label
    # tuned on validation (finalize reports both); None: not recorded. Not required to cover the
    # labels: it is a record, and a head cut to fewer labels is named by the head's check
    validation_thresholds: Mapping[str, float] | None = None
    # the criterion texts the model was trained with; None: saved before they were a study
    # setting, when training always used the packaged file
    descriptions: Mapping[str, str] | None = None
    # sha256 of the training data files: what a criteria and an evidence model must share.
    # None: saved before it was recorded.
    data_fingerprint: str | None = None

    def __post_init__(self) -> None:
        """Every check of the block, once, in the order a reader fixes them."""
        _one_of("formulation", self.formulation, [f for fs in FORMULATIONS.values() for f in fs])
        labels = self.labels
        if (
            not isinstance(labels, tuple)
            or not labels
            or not all(isinstance(x, str) for x in labels)
        ):
            _refuse("labels", f"must be a non-empty list of label names (got {labels!r})")
        if len(set(labels)) != len(labels):
            _refuse("labels", "a label appears twice")
        if (
            isinstance(self.max_length, bool)
            or not isinstance(self.max_length, int)
            or self.max_length < 1
        ):
            _refuse(
                "max_length",
                f"must be a whole number of tokens, at least 1 (got {self.max_length!r})",
            )
        _one_of("long_text", self.long_text, LONG_TEXT)
        _check_thresholds("thresholds", self.thresholds, labels)
        if self.validation_thresholds is not None:
            _check_thresholds("validation_thresholds", self.validation_thresholds, labels=None)
        if self.descriptions is not None:
            texts = self.descriptions
            if not isinstance(texts, Mapping) or not all(
                isinstance(v, str) for v in texts.values()
            ):
                _refuse("descriptions", "must map each label to its criterion text")
            if self.formulation != "multilabel" and (
                missing := [x for x in labels if x not in texts]
            ):
                _refuse("descriptions", f"no description for {', '.join(missing)}")
        fingerprint = self.data_fingerprint
        if fingerprint is not None and not (
            isinstance(fingerprint, str) and _FINGERPRINT.fullmatch(fingerprint)
        ):
            _refuse("data_fingerprint", f"must be 64 lower-case hex digits (got {fingerprint!r})")

    @property
    def task(self) -> str:
        """criteria or evidence: what the formulation is for."""
        return task_of(self.formulation)

    def to_json(self) -> dict:
        """The block as classifier.json holds it (``task`` repeats the file's, for readers)."""
        return {
            "task": self.task,
            "formulation": self.formulation,
            "labels": list(self.labels),
            "max_length": self.max_length,
            "long_text": self.long_text,
            "descriptions": _plain(self.descriptions),
            "thresholds": _plain(self.thresholds),
            "validation_thresholds": _plain(self.validation_thresholds),
            "data_fingerprint": self.data_fingerprint,
        }

    @classmethod
    def from_json(cls, block: object) -> InferenceSettings:
        """The block read back from a parsed classifier.json (every version hpo has written);
        raises ``InvalidClassifierFile`` naming the first field that is wrong."""
        if not isinstance(block, Mapping):
            raise InvalidClassifierFile(BLOCK, f"must be an object (got {type(block).__name__})")
        names = [f.name for f in fields(cls)]
        if unknown := sorted(set(block) - {*names, "task"}):
            _refuse(unknown[0], "unknown key")
        for required in (f.name for f in fields(cls) if f.default is MISSING):
            if required not in block:
                _refuse(required, "is required")
        values = {name: block[name] for name in names if name in block}
        if isinstance(values["labels"], list):  # JSON has no tuples
            values["labels"] = tuple(values["labels"])
        settings = cls(**values)
        if block.get("task") not in (None, settings.task):
            _refuse(
                "task",
                f"{block['task']!r}, but inference.formulation {settings.formulation!r} "
                f"makes a {settings.task} model",
            )
        return settings


def _refuse(name: str, problem: str) -> None:
    raise InvalidClassifierFile(f"{BLOCK}.{name}", problem)


def _one_of(name: str, value: object, allowed) -> None:
    if value not in allowed or not isinstance(value, str):
        _refuse(name, f"must be one of {', '.join(allowed)} (got {value!r})")


def _check_thresholds(name: str, thresholds: object, labels: tuple[str, ...] | None) -> None:
    """Each a probability; with ``labels``, one for each label and none for another."""
    if not isinstance(thresholds, Mapping):
        _refuse(name, f"must map each label to a probability (got {thresholds!r})")
    for label, value in thresholds.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            _refuse(f"{name}.{label}", f"must be a probability between 0 and 1 (got {value!r})")
    if labels is None:
        return
    if missing := [label for label in labels if label not in thresholds]:
        _refuse(name, f"no threshold for {', '.join(missing)}")
    if unknown := sorted(set(thresholds) - set(labels)):
        _refuse(name, f"{', '.join(unknown)} is not among inference.labels")


def _plain(mapping: Mapping | None) -> dict | None:
    return None if mapping is None else dict(mapping)


__all__ = [
    "BLOCK",
    "FORMULATIONS",
    "LONG_TEXT",
    "InferenceSettings",
    "InvalidClassifierFile",
    "task_of",
]
