"""The study file's smaller sections: sampler, pruner, heartbeat, tracking, and the storage URL
as a field."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, PlainSerializer, PlainValidator, ValidationError, model_validator

from hpo.spec._base import _locate, _problem, _Strict
from hpo.storage_url import StorageUrl
from hpo.vocabulary import Metric as Metric  # the metric keys' type, as hpo.spec exports it


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
    # auto: decided at the study's creation from the budget (hpo.study.search.plan_search): few full
    # trials buy the warm start, a portfolio around it and GPSampler, then TPE; more, TPE alone
    name: Literal["auto", "tpe", "gp", "random", "cmaes"] = "tpe"
    seed: int | None = None
    # sampler keyword arguments, checked when it is built (auto: its TPE's)
    options: dict[str, Any] = Field(default_factory=dict)


# Where a spec sets nothing, no trial is judged before the end of its second epoch (in epochs;
# scaled by units_per_epoch): on real posts 4 of 5 sampled trials were pruned after epoch 1 of a
# warm-up, and the one that survived scored worst. Sub-epoch looks are asked for by name, with
# a min_resource below units_per_epoch.
FIRST_RUNG = {
    "median": {"n_warmup_steps": 2},
    "hyperband": {"min_resource": 2},
    "successive_halving": {"min_resource": 2},
}
_RUNG_PRUNERS = ("hyperband", "successive_halving")


class PrunerSpec(_Strict):
    name: Literal["median", "hyperband", "successive_halving", "patient", "none"] = "median"
    # The pruner's resource is training progress, counted in 1/units_per_epoch of an epoch (one
    # pass over the training posts, whatever a trial's batch size, formulation or negative
    # ratio): the step of every intermediate value, and the unit of min_resource and
    # max_resource. 1: whole epochs. Above 1, a trial is also evaluated where a rung falls inside
    # an epoch (a min_resource below units_per_epoch), so a configuration is judged long before
    # it has paid for a full trial. A pruner without rungs (median) is asked at epoch ends only.
    units_per_epoch: int = Field(default=1, ge=1)
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

    def optuna_options(self, max_epochs: int) -> dict[str, Any]:
        """The keyword arguments of the Optuna pruner: the spec's options over the defaults (the
        first rung on whole epochs; Hyperband's max_resource is the longest trial, not
        Optuna's "auto", which takes the first finished trial's length however short)."""
        defaults = {
            key: epochs * self.units_per_epoch
            for key, epochs in FIRST_RUNG.get(self.name, {}).items()
        }
        if self.name == "hyperband":
            defaults["max_resource"] = max_epochs * self.units_per_epoch
        return {**defaults, **self.options}

    def rungs(self, max_epochs: int) -> tuple[int, ...]:
        """The steps (in units) at which a rung pruner judges some trial, up to the longest
        trial: min_resource x reduction_factor^k. Hyperband's brackets start at successive ones,
        so a trial evaluated at all of them is judged wherever its bracket asks. Empty for a
        pruner without rungs (it judges every epoch's report)."""
        if self.name not in _RUNG_PRUNERS:
            return ()
        options = self.optuna_options(max_epochs)
        first, factor = options.get("min_resource"), options.get("reduction_factor", 3)
        if not isinstance(first, int) or not isinstance(factor, int) or first < 1 or factor < 2:
            return ()  # "auto" or a bad option: the pruner's constructor names it
        rate = options.get("min_early_stopping_rate", 0) if self.name != "hyperband" else 0
        if not isinstance(rate, int) or rate < 0:
            return ()
        last, step, found = max_epochs * self.units_per_epoch, first * factor**rate, []
        while step <= last:
            found.append(step)
            step *= factor
        return tuple(found)


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


class FidelitySpec(_Strict):
    """Screening at a low fidelity (docs/specs.md#screening-at-a-low-fidelity): a configuration
    is first judged by a complete, cheaper run (the whole schedule on a share of the training
    posts), and the promising ones are run in full. The study relies on it only once the low
    fidelity has ranked its first ``check`` configurations as their full runs did."""

    # the low-fidelity run trains on this share of the training posts (stratified, the same
    # posts for every configuration; validation whole), with its own warm-up and decay
    train_share: float = Field(default=0.25, gt=0, lt=1)
    # a screened configuration is re-run in full when its value is in this top share of the
    # screened ones so far (asynchronous successive halving, ASHA's rule: 1/eta). A third kept
    # the best configuration in 0.80 of replayed orders from a quarter of the posts, a quarter
    # in 0.39 (bench fidelity_rank)
    promote: float = Field(default=1 / 3, gt=0, lt=1)
    # configurations run at both fidelities, unpruned, before the study screens: over 6, a
    # fidelity that ranks at random reaches 0.6 in 87 of 720 orders (0.12); over 4, 0.21
    check: int = Field(default=6, ge=3, le=50)
    # the rank correlation the check must reach; below it the study runs full trials only
    min_rank_correlation: float = Field(default=0.6, ge=-1, le=1)


class TrackingSpec(_Strict):
    """Where trials are logged besides the study (optional; needs the ``tracking`` extra)."""

    # tracking URI: http://host:5000, sqlite:///mlflow.db
    mlflow: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _no_secret_in_uri(self) -> TrackingSpec:
        # Unlike the storage, a spec field travels as it is: on every child's command line,
        # into the study's recorded spec and finalize's files. MLflow reads credentials from
        # its own variables, so the URI never needs to carry them.
        if self.mlflow and StorageUrl.of(self.mlflow).holds_secrets:
            raise _problem(
                "holds a password or token, which would show in `ps`, the study and its files; "
                "give the URI without it and set MLFLOW_TRACKING_USERNAME and "
                "MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) instead",
                at="mlflow",
            )
        return self
