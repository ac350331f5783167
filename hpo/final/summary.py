"""finalize's result as one checked record: ``metrics.json`` beside ``final/model``, which the
model card is rendered from, ``hpo.finalize`` returns as a dict, and the study's ``final``
attribute is drawn from.

Written by finalize in one piece (``FinalSummary``), read back by a rerun, the card and the
HTML report through the same model; it serializes to the JSON finalize has always written,
key for key and in the same order: a field's place in a class below is its place in the file,
and a part an older finalize did not write (``cv``, ``ensemble``, ``reused_from_trial``, ...)
is left out, not written as null. Figures keep their JSON type (an int stays an int).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hpo.vocabulary import Ensemble, Refit, Threshold, ThresholdRule

Number = float | int  # a figure as JSON holds it: 1 stays 1, 0.5 stays 0.5
Figures = dict[str, Number | None]  # metric name -> value (None: not defined on the split)


def _absent(value: object) -> bool:
    return value is None


Omitted = Field(default=None, exclude_if=_absent)  # a part older summaries lack, not null


class _Part(BaseModel):
    # not strict: a float field would turn the JSON 1 into 1.0, so numbers are Number; unknown
    # keys are refused, as a misspelt one in code would otherwise vanish from metrics.json
    model_config = ConfigDict(extra="forbid", frozen=True)


class Seed(_Part):
    """One retraining of a configuration, on validation."""

    seed: int
    value: Number  # the study's metric, as the search judged it
    best_epoch: int
    run: str  # its folder under final/runs
    reused_from_trial: int | None = Omitted  # the trial whose kept checkpoint it is


class RunResult(_Part):
    """One retraining's ``result.json`` (or a reused checkpoint's, ``reused_from_trial`` set),
    written last in its run folder: its presence means the run and its model are complete."""

    run: str  # its folder under final/runs
    rank: int
    trial: int
    seed: int
    fold: tuple[int, int] | None = None  # a --cv fold: (K, its index); older files lack it
    params: dict[str, Any]
    value: Number  # the study's metric on validation
    best_epoch: int
    metrics: Figures
    wall_seconds: Number | None  # its training (a reused checkpoint's: the trial's)
    reused_from_trial: int | None = Omitted

    def seed_part(self) -> Seed:
        """What ``metrics.json`` keeps of it among its configuration's seeds."""
        return Seed(
            seed=self.seed,
            value=self.value,
            best_epoch=self.best_epoch,
            run=self.run,
            reused_from_trial=self.reused_from_trial,
        )


class Configuration(_Part):
    """One of the study's best configurations, retrained with several seeds."""

    rank: int
    trial: int
    params: dict[str, Any]
    mean: Number
    sd: Number
    seeds: list[Seed]


class Chosen(_Part):
    """The model finalize chose: its configuration, and its seed (None: the seeds' ensemble)."""

    trial: int
    params: dict[str, Any]
    seed: int | None
    run: str
    best_epoch: int
    validation: Figures  # on validation, at the decision thresholds
    threshold: Threshold | None = Omitted  # the spec's train.threshold it was trained with


class OutOfFold(_Part):
    posts: int
    prior_positives: Number
    thresholds: dict[str, Number]
    per_symptom: dict[str, dict[str, Any]]


class CrossValidation(_Part):
    """--cv K: the chosen configuration on K folds of train + validation."""

    k: int
    seed: int
    values: list[Number]
    mean: Number
    sd: Number
    runs: list[str]
    out_of_fold: OutOfFold


class Decision(_Part):
    """The decision thresholds: the rule, the set it chose, and every candidate on validation."""

    rule: ThresholdRule
    chosen: dict[str, Number]
    candidates: dict[ThresholdRule, dict[str, Number]]
    validation: dict[ThresholdRule, Figures]


class SeedEnsemble(_Part):
    members: list[str]  # the run names averaged
    value: Number  # on validation, as each seed's value was judged


class RefitRecord(_Part):
    on: Refit
    epochs: int | None  # train+val: the epochs retrained for; train: None


class Interval(_Part):
    """A 95% percentile bootstrap interval over the test posts."""

    low: Number
    high: Number
    level: Number | None = Omitted
    resamples: int
    seed: int
    posts: int


class TestScores(_Part):
    """The test split, scored once, at the decision thresholds."""

    metrics: Figures
    intervals: dict[str, Interval] = {}
    per_symptom: dict[str, dict[str, Any]]
    thresholds: dict[str, Number]


class SplitSize(_Part):
    posts: int
    examples: int


class Settings(_Part):
    """What finalize ran with (FinalizeOptions, its defaults filled in)."""

    top_k: int
    seeds: int
    refit: Refit
    ensemble: Ensemble
    cv: int


class SearchState(_Part):
    """How far the search had got when it was finalized."""

    n_trials: int
    finished: int
    running: int
    partial: bool
    ended_by_time_budget: bool


class FinalSummary(_Part):
    """metrics.json."""

    study: str
    metric: str
    direction: str
    configurations: list[Configuration]  # best mean first
    chosen: Chosen
    cv: CrossValidation | None = Omitted
    thresholds: Decision | None = Omitted  # absent: a summary from before the rule was recorded
    ensemble: SeedEnsemble | None = Omitted  # absent: one model, not an ensemble
    refit: RefitRecord | None = Omitted
    test: TestScores
    split_sizes: dict[str, SplitSize] = {}
    data_fingerprint: str
    settings: Settings | None = Omitted
    search: SearchState | None = Omitted
    libraries: dict[str, str]
    command: str
    finished: str  # when finalize finished, ISO 8601 with its UTC offset
    model_files: dict[str, int] | None = Omitted  # the model's files and sizes, for a rerun

    @property
    def best(self) -> Configuration:
        """The configuration with the best mean validation value: the chosen one's."""
        return self.configurations[0]

    @property
    def refit_on(self) -> Refit:
        return self.refit.on if self.refit else "train"

    @property
    def rule(self) -> ThresholdRule | None:
        """How the decision thresholds were chosen (None: a summary from before it was kept)."""
        return self.thresholds.rule if self.thresholds else None

    @property
    def is_evidence(self) -> bool:
        """An evidence model's: its test figures rank sentences."""
        return "recall_at_1" in self.test.metrics

    def to_json(self) -> dict[str, Any]:
        """The summary as metrics.json holds it (python mode: a NaN figure stays NaN, as
        json.dumps writes it, where pydantic's JSON mode would make it null)."""
        return self.model_dump()

    @classmethod
    def read(cls, path: Path) -> FinalSummary:
        """``path`` (a metrics.json), checked as a whole; raises pydantic's ValidationError,
        or ValueError where it is no JSON."""
        return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))
