"""How a saved classifier reads text and where it decides: the ``inference`` block of its
``classifier.json``, as one frozen value.

Training builds it (``hpo.train.loop``) and ``save_classifier`` writes ``to_json()``;
prediction, explanation and finalize read it back with ``from_json``. It is checked once,
whenever one is built, so an edited file is refused naming the field it breaks: a negative
``max_length`` would change every probability silently, a threshold of 7 would decide
nothing, and a missing criterion text would end in a KeyError mid-prediction. Field checks
are pydantic's (strict: "128" is not a length, true is not a threshold); what relates fields
to each other is checked in the one validator, which also turns every problem into one
``InvalidClassifierFile`` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import ConfigDict, Field, Strict, TypeAdapter, ValidationError, model_validator
from pydantic.dataclasses import dataclass

from hpo.errors import UsageError
from hpo.validation import located
from hpo.vocabulary import TRAITS, Formulation, FormulationTraits, LongText, Task, task_of

BLOCK = "inference"  # the block's key in classifier.json, the start of every field path
Probability = Annotated[float, Strict(), Field(ge=0, le=1)]
Text = Annotated[str, Strict()]


class InvalidClassifierFile(UsageError):
    """A classifier.json that breaks its schema; ``field`` is the dotted path of what is wrong."""

    def __init__(self, field: str, problem: str):
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class InferenceSettings:
    """What prediction needs to treat new text as training did, and its decision thresholds."""

    formulation: Formulation
    labels: Annotated[tuple[Text, ...], Field(min_length=1)]  # in the head's column order
    max_length: Annotated[int, Strict(), Field(ge=1)]  # tokens per sequence
    long_text: LongText  # what training did with a text longer than max_length
    thresholds: Mapping[str, Probability]  # the decision threshold per label
    # tuned on validation (finalize reports both); None: not recorded. Not required to cover the
    # labels: it is a record, and a head cut to fewer labels is named by the head's check
    validation_thresholds: Mapping[str, Probability] | None = None
    # the criterion texts the model was trained with; None: saved before they were a study
    # setting, when training always used the packaged file
    descriptions: Mapping[str, Text] | None = None
    # sha256 of the training data files: what a criteria and an evidence model must share.
    # None: saved before it was recorded.
    data_fingerprint: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _checked_once(cls, data: object, build) -> InferenceSettings:
        """Pydantic's field checks, then the rules across fields, each problem as one
        ``InvalidClassifierFile`` (not a ValueError, so pydantic lets it through as it is)."""
        try:
            settings = build(data)
        except ValidationError as error:
            path, problem = located(error.errors()[0])
            raise InvalidClassifierFile(".".join(filter(None, (BLOCK, path))), problem) from None
        labels = settings.labels
        if not TRAITS[settings.formulation].can_read(settings.long_text):
            _refuse("long_text", "whole_post reads sentences, and only whole_post does")
        if len(set(labels)) != len(labels):
            _refuse("labels", "a label appears twice; list each once")
        if missing := [label for label in labels if label not in settings.thresholds]:
            _refuse("thresholds", f"no threshold for {', '.join(missing)}")
        if unknown := sorted(set(settings.thresholds) - set(labels)):
            _refuse("thresholds", f"{', '.join(unknown)} is not among inference.labels")
        if (
            settings.descriptions is not None
            and not TRAITS[settings.formulation].per_post
            and (missing := [label for label in labels if label not in settings.descriptions])
        ):
            _refuse("descriptions", f"no description for {', '.join(missing)}")
        return settings

    @property
    def traits(self) -> FormulationTraits:
        """What the saved model's formulation is (hpo.vocabulary.TRAITS)."""
        return TRAITS[self.formulation]

    @property
    def task(self) -> Task:
        """criteria or evidence: what the formulation is for."""
        return task_of(self.formulation)

    def to_json(self) -> dict:
        """The block as classifier.json holds it (``task`` repeats the file's, for readers)."""
        return {"task": self.task, **_JSON.dump_python(self, mode="json")}

    @classmethod
    def from_json(cls, block: object) -> InferenceSettings:
        """The block read back from a parsed classifier.json (every version hpo has written);
        raises ``InvalidClassifierFile`` naming the first field that is wrong."""
        if not isinstance(block, Mapping):
            raise InvalidClassifierFile(BLOCK, f"must be an object (got {type(block).__name__})")
        settings = _JSON.validate_python({k: v for k, v in block.items() if k != "task"})
        if block.get("task") not in (None, settings.task):
            _refuse(
                "task",
                f"{block['task']!r}, but inference.formulation {settings.formulation!r} "
                f"makes a {settings.task} model",
            )
        return settings


_JSON = TypeAdapter(InferenceSettings)


def _refuse(name: str, problem: str) -> None:
    raise InvalidClassifierFile(f"{BLOCK}.{name}", problem)


__all__ = ["BLOCK", "InferenceSettings", "InvalidClassifierFile"]
