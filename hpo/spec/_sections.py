"""The study file's smaller sections: sampler, pruner, heartbeat, tracking, the metric
names, and the storage URL as a field."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, PlainSerializer, PlainValidator, ValidationError, model_validator

from hpo.spec._base import _locate, _problem, _Strict
from hpo.storage_url import StorageUrl


def _storage_url(value: object) -> StorageUrl:
    if isinstance(value, StorageUrl | str):
        return StorageUrl.of(value)
    raise _problem(
        f"must be a URL such as sqlite:///PATH or postgresql://USER@HOST/DB, not a "
        f"{type(value).__name__}"
    )


# A spec dumped (logged, shown) gives the URL redacted, never its password.
StorageField = Annotated[
    StorageUrl, PlainValidator(_storage_url), PlainSerializer(str, return_type=str)
]


class SamplerSpec(_Strict):
    name: Literal["tpe", "gp", "random", "cmaes"] = "tpe"
    seed: int | None = None
    # sampler keyword arguments, checked when it is built
    options: dict[str, Any] = Field(default_factory=dict)


class PrunerSpec(_Strict):
    name: Literal["median", "hyperband", "successive_halving", "patient", "none"] = "median"
    # pruner keyword arguments, checked when it is built
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_patient(self) -> PrunerSpec:
        if self.name == "patient":
            try:
                self.patient_options()
            except ValidationError as error:
                path, problem = _locate(error.errors()[0])
                raise _problem(problem, at=f"options.{path}") from None
        return self

    def patient_options(self) -> PatientOptions:
        """``patient`` wraps another pruner, so its options are a spec of their own."""
        return PatientOptions.model_validate(self.options)


class PatientOptions(_Strict):
    patience: int = Field(ge=0)
    wrapped: PrunerSpec = Field(default_factory=PrunerSpec)


class HeartbeatSpec(_Strict):
    """How fast a dead worker's trial is noticed (interval + grace_period) and re-queued."""

    interval: int = Field(default=10, ge=1)  # seconds between a running trial's heartbeats
    grace_period: int = Field(default=30, ge=2)  # silence after which a trial counts as dead
    max_retry: int = Field(default=3, ge=0)  # re-queues of one trial

    @model_validator(mode="after")
    def _grace_exceeds_interval(self) -> HeartbeatSpec:
        if self.grace_period <= self.interval:
            raise _problem("must be longer than heartbeat.interval", at="grace_period")
        return self


class TrackingSpec(_Strict):
    """Where trials are logged besides the study (optional; needs the ``tracking`` extra)."""

    # tracking URI: http://host:5000, sqlite:///mlflow.db
    mlflow: str | None = Field(default=None, min_length=1)


Metric = Literal[
    "macro_f1",
    "f1",
    "precision",
    "recall",
    "accuracy",
    "auroc",
    "average_precision",
    "post_micro_f1",
    "post_macro_f1",
    "recall_at_1",
    "recall_at_3",
]
