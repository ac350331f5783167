"""``StudySpec``: a whole study file, validated as one object, and what it answers about the
search (which settings a trial trains with, whether a parameter applies, whether a hand-given
point fits)."""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from hpo import outputs, storage_url
from hpo.spec._base import (
    _as_number,
    _problem,
    _Strict,
    boolean_problem,
)
from hpo.spec._params import (
    CategoricalParam,
    FloatParam,
    IntParam,
    Param,
    _candidates,
    _one_of,
    _value_problem,
)
from hpo.spec._sections import (
    FidelitySpec,
    HeartbeatSpec,
    PrunerSpec,
    SamplerSpec,
    StorageField,
    TrackingSpec,
)
from hpo.spec._train_settings import (
    _INTEGER_FIELDS,
    _NUMBER_FIELDS,
    _TRAIN_CONFIG,
    TRAIN_DEFAULTS,
    TRAIN_LIMITS,
    _check_settable,
)
from hpo.storage_url import StorageUrl
from hpo.train.config import TrainConfig
from hpo.validation import located
from hpo.vocabulary import Metric, Task

DEFAULT_STORAGE = storage_url.DEFAULT
DEFAULT_OUTPUT_DIR = "_runs/studies"  # trial folders and the artifact store
# a study's name, in characters: room for what is added to it in a file name (-UID8,
# -JOBID_TASK.log) within the 255 bytes most filesystems allow
MAX_NAME_LENGTH = 128
# Past any budget, so a number this large is a typo: every trial trains a model (the supermax
# specs' 800 take days), and the samplers' cost per trial grows with the trials told.
MAX_TRIALS = 100_000


class StudySpec(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    task: Task
    data_dir: str
    direction: Literal["maximize", "minimize"] = "maximize"
    metric: Metric = "macro_f1"  # post_*: criteria only; recall_at_*: evidence only
    # what the pruner judges epochs by (None: metric). A threshold-free one (average_precision,
    # auroc) ranks how well scores separate, not F1 at a fixed 0.5: hpo validate warns when
    # the metric is judged at a fixed threshold (bench pruning_regret)
    prune_on: Metric | None = None
    # finished (complete + pruned) trials across all workers
    n_trials: int = Field(ge=1, le=MAX_TRIALS)
    # load_spec resolves it: --storage, $HPO_STORAGE, file
    storage: StorageField = StorageUrl(DEFAULT_STORAGE)
    output_dir: str = DEFAULT_OUTPUT_DIR
    keep_top_k: int = Field(default=3, ge=0)
    timeout_per_trial: float | None = Field(default=None, gt=0)
    # seconds of wall clock for the whole search, from `hpo tune` (or `hpo submit`): no trial starts
    # that the rest cannot take to its first rung (without rungs: cannot fit), running ones end at
    # their next epoch's end and are kept. Finite and
    # at most a year: 1e400 (inf) created the study, then ended in an OverflowError
    timeout: float | None = Field(default=None, gt=0, le=365 * 24 * 3600, allow_inf_nan=False)
    sampler: SamplerSpec = Field(default_factory=SamplerSpec)
    pruner: PrunerSpec = Field(default_factory=PrunerSpec)
    fidelity: FidelitySpec | None = None  # None: every trial a full run
    heartbeat: HeartbeatSpec = Field(default_factory=HeartbeatSpec)
    tracking: TrackingSpec = Field(default_factory=TrackingSpec)
    model_paths: dict[str, str] = Field(default_factory=dict)  # encoder name -> local path
    train: dict[str, Any] = Field(default_factory=dict)
    search_space: dict[str, Param] = Field(min_length=1)
    # parameter sets tried first, enqueued once when the study is created (a known-good recipe)
    warm_start: tuple[dict[str, Any], ...] = ()
    _source: str = PrivateAttr(default="<memory>")

    @field_validator("name")
    @classmethod
    def _name_starts_a_folder(cls, name: str) -> str:
        # The name becomes a folder under output_dir: "." or ".." would put trials beside it.
        if not name[0].isalnum():
            raise _problem(
                f"must start with a letter or digit: it names a folder under output_dir "
                f"(got {name!r})"
            )
        if len(name) > MAX_NAME_LENGTH:
            raise _problem(
                f"is {len(name)} characters long; give at most {MAX_NAME_LENGTH}: it names folders "
                "and files (NAME-UID under output_dir, NAME.sbatch), and a file name past 255 "
                "bytes fails every trial"
            )
        return name

    @property
    def source(self) -> str:
        """The study file this spec was loaded from, for messages and logs."""
        return self._source

    def study_dir(self, uid: str) -> Path:
        """The trial folders' parent for the study with this ``uid``
        (``hpo.study.records.study_uid``)."""
        return outputs.study_dir(self.output_dir, self.name, uid)

    @property
    def encoders(self) -> list[str]:
        """The encoders a trial of this spec can train: the searched choices, or the fixed one."""
        searched = self.search_space.get("encoder")
        return list(searched.choices) if searched is not None else [self.train["encoder"]]

    @property
    def gpus_per_trial(self) -> int:
        """The most GPUs any trial of this spec can ask for."""
        searched = self.search_space.get("gpus_per_trial")
        if searched is None:
            return int(self.setting("gpus_per_trial"))
        return int(
            max(searched.choices) if isinstance(searched, CategoricalParam) else searched.high
        )

    def setting(self, name: str) -> object:
        """A training setting as a trial takes it where not searched: the spec's ``train``
        value, else ``TrainConfig``'s default."""
        return self.train.get(name, TRAIN_DEFAULTS.get(name))

    def applies(self, name: str, values: Mapping[str, object]) -> bool:
        """Whether searched parameter ``name`` is sampled when the earlier ones took ``values``
        (a parent that was not sampled itself fails the condition)."""
        when = self.search_space[name].when or {}
        return all(
            parent in values and _one_of(values[parent], allowed)
            for parent, allowed in when.items()
        )

    def train_config(self, params: Mapping[str, object], checkpoint_dir: str | None) -> TrainConfig:
        """The plain config of one trial: the fixed settings plus its sampled ``params``;
        a conditional parameter that was not sampled keeps the TrainConfig default."""
        expected = [name for name in self.search_space if self.applies(name, params)]
        if set(params) != set(expected):
            raise ValueError(
                f"params {sorted(params)} do not match the search space's applicable "
                f"{sorted(expected)}"
            )
        settings = {**self.train, **params}
        settings["encoder"] = self.model_paths.get(settings["encoder"], settings["encoder"])
        return self._build(settings, checkpoint_dir)

    def _build(
        self, settings: Mapping[str, object], checkpoint_dir: str | None = None
    ) -> TrainConfig:
        return _TRAIN_CONFIG.validate_python(
            {
                "task": self.task,
                "data_dir": self.data_dir,
                "objective_metric": self.metric,
                "checkpoint_dir": checkpoint_dir,
                **settings,
            }
        )

    @model_validator(mode="after")
    def _check_settings(self) -> StudySpec:
        for name in self.train:
            _check_settable(name, at=f"train.{name}")
        for name, param in self.search_space.items():
            _check_settable(name, at=f"search_space.{name}")
            if name in self.train:
                raise _problem(
                    "is also fixed in train; set it in one place", at=f"search_space.{name}"
                )
            if name in _INTEGER_FIELDS and isinstance(param, FloatParam):
                raise _problem(
                    "is an integer setting; use type: int", at=f"search_space.{name}.type"
                )
        self._check_no_boolean_numbers()
        self._check_conditions()
        for index, point in enumerate(self.warm_start):
            problem = self.point_problem(point)
            if problem:
                raise _problem(problem[1], at=f"warm_start.{index}.{problem[0]}".rstrip("."))
        if "encoder" not in self.train and "encoder" not in self.search_space:
            raise _problem(
                "is required: fix it in train or search it in search_space", at="train.encoder"
            )
        for key in ("metric", "prune_on"):
            metric = getattr(self, key) or ""
            if self.task == "evidence" and metric.startswith("post_"):
                raise _problem(f"{metric} is a post-level metric, only for task criteria", at=key)
            if self.task == "criteria" and metric.startswith("recall_at_"):
                raise _problem(f"{metric} ranks sentences, only for task evidence", at=key)
        if self.prune_on and self.direction == "minimize":
            raise _problem(
                "every metric is higher-is-better: prune_on needs direction: maximize",
                at="prune_on",
            )
        if self.fidelity and self.n_trials <= 2 * self.fidelity.check:
            raise _problem(
                f"{self.fidelity.check} configurations run at both fidelities take "
                f"{2 * self.fidelity.check} of n_trials {self.n_trials}, leaving none to screen; "
                "lower fidelity.check or raise n_trials",
                at="fidelity.check",
            )
        self._probe_train_configs()
        return self

    def _check_no_boolean_numbers(self) -> None:
        for name, value in self.train.items():
            if name in _NUMBER_FIELDS and isinstance(value, bool):
                raise _problem(boolean_problem(value), at=f"train.{name}")
        for name, param in self.search_space.items():
            if name in _NUMBER_FIELDS and isinstance(param, CategoricalParam):
                for index, choice in enumerate(param.choices):
                    if isinstance(choice, bool):
                        raise _problem(
                            boolean_problem(choice), at=f"search_space.{name}.choices.{index}"
                        )

    def _check_conditions(self) -> None:
        names = list(self.search_space)
        for name, param in self.search_space.items():
            for parent, allowed in (param.when or {}).items():
                at = f"search_space.{name}.when.{parent}"
                if parent not in self.search_space:
                    raise _problem(
                        _not_searched(
                            parent,
                            names,
                            self.train,
                            need="; a condition names an earlier searched parameter",
                        ),
                        at=at,
                    )
                if cycle := self._cycle(name, parent):
                    raise _problem(
                        f"forms a cycle {' -> '.join(cycle)}; drop one of these conditions", at=at
                    )
                if names.index(parent) > names.index(name):
                    raise _problem(
                        f"is listed after {name}; list {parent} first in search_space", at=at
                    )
                for value in allowed:
                    if problem := _value_problem(
                        self.search_space[parent], value, parent, condition=True
                    ):
                        raise _problem(problem, at=at)

    def _cycle(self, child: str, parent: str) -> list[str] | None:
        """The path of conditions from ``child`` through ``parent`` back to ``child``, if any."""

        def back_to_child(node: str, seen: set[str]) -> list[str] | None:
            if node == child:
                return [node]
            if node in seen or node not in self.search_space:
                return None
            seen.add(node)
            for up in self.search_space[node].when or {}:
                if rest := back_to_child(up, seen):
                    return [node, *rest]
            return None

        rest = back_to_child(parent, set())
        return [child, *rest] if rest else None

    def point_problem(self, point: Mapping[str, object]) -> tuple[str, str] | None:
        """(key, problem) for the first thing wrong with a hand-given parameter set (a
        ``warm_start`` entry, ``hpo enqueue --set``), or None. Names left out are sampled."""
        if not isinstance(point, Mapping) or not point:
            return (
                "",
                "must be a mapping of searched parameters to values, e.g. {learning_rate: 2.0e-5}",
            )
        for name, value in point.items():
            if name not in self.search_space:
                return name, _not_searched(name, list(self.search_space), self.train)
            if problem := _value_problem(self.search_space[name], _as_number(value), name):
                return name, problem
            if not self.applies(name, point):
                return name, (
                    f"applies only when {self.search_space[name].condition_text()}; "
                    "set that too, or leave this out"
                )
        return None

    def typed_point(self, point: Mapping[str, object]) -> dict[str, object]:
        """A checked ``point`` with its numbers as the search space takes them ("2e-5" and
        an int in a float range become floats, 3.0 in an int range 3), as Optuna must be given
        them."""
        typed = {name: _as_number(value) for name, value in point.items()}
        as_type = {FloatParam: float, IntParam: int}
        return {
            name: as_type.get(type(self.search_space[name]), lambda same: same)(value)
            for name, value in typed.items()
        }

    def _probe_train_configs(self) -> None:
        """Build TrainConfigs from the fixed settings and every value range end and choice.

        Catches wrong types (``epochs: "two"``) and bad values (``batch_size: 0``) before
        any trial runs, naming the key that holds them.
        """
        candidates = {name: _candidates(param) for name, param in self.search_space.items()}
        first = {name: values[0] for name, values in candidates.items()}
        self._probe({**self.train, **self._sampled(first)}, blame=None)
        for name, values in candidates.items():
            for value in values[1:]:
                point = {**first, name: value}
                for parent, allowed in (self.search_space[name].when or {}).items():
                    if not _one_of(point[parent], allowed):  # a point where it is sampled
                        point[parent] = allowed[0]
                self._probe({**self.train, **self._sampled(point)}, blame=name)
        # every two choices that can meet: a rule between two fields (whole_post takes no
        # long_text) holds only at some pairs; a few hundred configs, milliseconds
        choices = [name for name, values in candidates.items() if self._is_choice(name)]
        for one, other in itertools.combinations(choices, 2):
            for pair in itertools.product(candidates[one], candidates[other]):
                point = {**first, one: pair[0], other: pair[1]}
                if self.applies(one, point) and self.applies(other, point):
                    self._probe({**self.train, **self._sampled(point)}, blame=None)

    def _is_choice(self, name: str) -> bool:
        param = self.search_space[name]
        return isinstance(param, CategoricalParam) and len(param.choices) > 1

    def _sampled(self, point: Mapping[str, object]) -> dict[str, object]:
        """``point`` without the parameters its other values leave unsampled, as a trial's."""
        return {name: value for name, value in point.items() if self.applies(name, point)}

    def _probe(self, settings: Mapping[str, object], blame: str | None) -> None:
        try:
            config = self._build(settings)
        except ValidationError as error:
            path, problem = located(error.errors()[0])
            # a TrainConfig field, or "" for the config as a whole
            raise self._blamed(settings, blame, path.split(".")[0], problem) from None
        for field, most in TRAIN_LIMITS.items():
            if (value := getattr(config, field)) > most:
                problem = f"must be at most {most} (got {value})"
                raise self._blamed(settings, blame, field, problem)

    def _blamed(
        self, settings: Mapping[str, object], blame: str | None, field: str, problem: str
    ) -> Exception:
        """``problem`` with TrainConfig ``field``, located where the spec sets it: the searched
        parameter whose value was probed (``blame``), or the fixed setting."""
        name = blame or field
        if name in self.search_space:
            return _problem(
                f"{name}={settings[name]!r} is invalid: {problem}", at=f"search_space.{name}"
            )
        return _problem(problem, at=f"train.{field}" if field else "train")


def _not_searched(
    name: str, searched: list[str], train: Mapping[str, object], need: str = ""
) -> str:
    if name in train:
        return f"'{name}' is fixed in train, not searched{need}"
    close = difflib.get_close_matches(name, searched, n=1)
    return f"'{name}' is not in search_space{need}" + (
        f"; did you mean '{close[0]}'?" if close else ""
    )
