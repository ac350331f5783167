"""A study file (YAML) loaded once into a frozen, validated ``StudySpec``.

Precedence: the file, then ``key.path=value`` overrides, then the storage URL from the
CLI or ``HPO_STORAGE``. Every problem is a ``SpecError`` on one line naming the file and
the dotted key path, so a typo fails at launch rather than at trial 300.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_type_hints

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from hpo import outputs, storage_url
from hpo.errors import UsageError
from hpo.storage_url import StorageUrl
from hpo.train.config import TrainConfig

DEFAULT_STORAGE = storage_url.DEFAULT
DEFAULT_OUTPUT_DIR = "_runs/studies"  # trial folders and the artifact store
STORAGE_ENV = storage_url.ENV
resolve_storage = StorageUrl.resolve  # the name hpo/commands.py imports, until it calls StorageUrl.resolve

# TrainConfig fields that come from the spec's top level (or per trial), never from train/search_space.
_FROM_TOP_LEVEL = {"task": "task", "data_dir": "data_dir", "objective_metric": "metric", "checkpoint_dir": "output_dir"}
_FINALIZE_ONLY = {"train_on"}  # a refit's setting: a search that trained on validation would judge itself on it
SETTABLE_FIELDS = TrainConfig.field_names() - _FROM_TOP_LEVEL.keys() - _FINALIZE_ONLY
_INTEGER_FIELDS = frozenset(
    name for name, hint in get_type_hints(TrainConfig).items() if int in (get_args(hint) or (hint,))
)
_TRAIN_CONFIG = TypeAdapter(TrainConfig)  # checks field types (and coerces "1e-5"), then runs __post_init__
_SCALARS = (str, int, float, bool, type(None))
_PARAM_TYPES = ("float", "int", "categorical")
# YAML 1.1 reads 1e-5 (no dot, or an unsigned exponent) as a string; nobody means that.
_EXPONENT_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


class SpecError(UsageError):
    """A study file, or an override of it, that cannot be used."""


def _problem(problem: str, at: str = "") -> PydanticCustomError:
    """A validation error at key ``at`` below the model being validated.

    Pydantic's location stops at the model whose validator raised; ``at`` carries the rest.
    """
    return PydanticCustomError("spec", "{problem}", {"problem": problem, "at": at})


def _as_number(value: object) -> object:
    return float(value) if isinstance(value, str) and _EXPONENT_NUMBER.fullmatch(value.strip()) else value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Scalar = str | int | float | bool | None


def _storage_url(value: object) -> StorageUrl:
    if isinstance(value, StorageUrl | str):
        return StorageUrl.of(value)
    raise _problem(f"must be a URL such as sqlite:///PATH or postgresql://USER@HOST/DB, not a {type(value).__name__}")


# A spec dumped (logged, shown) gives the URL redacted, never its password.
StorageField = Annotated[StorageUrl, PlainValidator(_storage_url), PlainSerializer(str, return_type=str)]


class _Searched(_Strict):
    # Sampled only when each named earlier parameter took one of the listed values
    # (``when: {adapter: lora}``, ``when: {head_layers: [1, 2]}``); otherwise the TrainConfig default.
    when: dict[str, tuple[Scalar, ...]] | None = None

    @field_validator("when", mode="before")
    @classmethod
    def _listed_values(cls, when: object) -> object:
        if not isinstance(when, dict):
            return when  # pydantic names the wrong type (null means no condition)
        if not when:
            raise _problem("must name at least one parameter, e.g. when: {adapter: lora}")
        listed = {}
        for parent, allowed in when.items():
            values = allowed if isinstance(allowed, list | tuple) else [allowed]
            if not values or not all(isinstance(value, _SCALARS) for value in values):
                raise _problem("must be a value or a non-empty list of values", at=str(parent))
            listed[parent] = [_as_number(value) for value in values]
        return listed

    def condition_text(self) -> str:
        """``adapter is lora``, ``head_layers in 1, 2``: the condition as ``hpo validate`` shows it."""
        return " and ".join(f"{parent} is {allowed[0]}" if len(allowed) == 1 else
                            f"{parent} in {', '.join(map(str, allowed))}" for parent, allowed in (self.when or {}).items())


class _RangeParam(_Searched):
    low: FiniteFloat
    high: FiniteFloat
    log: bool = False
    step: FiniteFloat | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check_range(self) -> _RangeParam:
        if self.low == self.high:
            raise _problem(f"equals high ({self.high}); use a fixed train setting instead", at="low")
        if self.low > self.high:
            raise _problem(f"must be less than high ({self.low} > {self.high})", at="low")
        if self.log and self.low <= 0:
            raise _problem(f"must be > 0 with log: true (got {self.low})", at="low")
        if self.log and self.step is not None:
            raise _problem("cannot be combined with log: true (Optuna forbids it)", at="step")
        return self


class FloatParam(_RangeParam):
    type: Literal["float"]


class IntParam(_RangeParam):
    type: Literal["int"]
    low: int
    high: int
    step: int | None = Field(default=None, gt=0)


class CategoricalParam(_Searched):
    type: Literal["categorical"]
    choices: tuple[str | int | float | bool | None, ...]

    @field_validator("choices", mode="before")
    @classmethod
    def _distinct_scalars(cls, choices: object) -> object:
        if not isinstance(choices, list | tuple):
            return choices  # pydantic names the wrong type
        if not choices:
            raise _problem("must list at least one choice")
        seen: set[tuple[type, object]] = set()
        for index, choice in enumerate(choices):
            if not isinstance(choice, _SCALARS):
                raise _problem(f"must be a string, number, boolean or null, not a {type(choice).__name__}",
                               at=str(index))
            if (type(choice), choice) in seen:  # by type too: 1 and true are different choices
                raise _problem(f"duplicate choice {choice!r}")
            seen.add((type(choice), choice))
        return [_as_number(choice) for choice in choices]


Param = Annotated[FloatParam | IntParam | CategoricalParam, Field(discriminator="type")]


class SamplerSpec(_Strict):
    name: Literal["tpe", "gp", "random", "cmaes"] = "tpe"
    seed: int | None = None
    options: dict[str, Any] = Field(default_factory=dict)  # sampler keyword arguments, checked when it is built


class PrunerSpec(_Strict):
    name: Literal["median", "hyperband", "successive_halving", "patient", "none"] = "median"
    options: dict[str, Any] = Field(default_factory=dict)  # pruner keyword arguments, checked when it is built

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

    mlflow: str | None = Field(default=None, min_length=1)  # tracking URI: http://host:5000, sqlite:///mlflow.db


Metric = Literal["macro_f1", "f1", "precision", "recall", "accuracy", "auroc", "average_precision",
                 "post_micro_f1", "post_macro_f1", "recall_at_1", "recall_at_3"]


class StudySpec(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    task: Literal["criteria", "evidence"]
    data_dir: str
    direction: Literal["maximize", "minimize"] = "maximize"
    # post_*: the post-level multi-label F1 the ReDSM5 paper reports (criteria); recall_at_*: evidence
    metric: Metric = "macro_f1"
    # what the pruner judges epochs by (None: metric); a threshold-free one (average_precision, auroc)
    # ranks configurations at epoch 1, where a thresholded F1 mostly says how far warm-up has gone
    prune_on: Metric | None = None
    n_trials: int = Field(ge=1)  # finished (complete + pruned) trials across all workers
    storage: StorageField = StorageUrl(DEFAULT_STORAGE)  # load_spec resolves it: --storage, $HPO_STORAGE, file
    output_dir: str = DEFAULT_OUTPUT_DIR
    keep_top_k: int = Field(default=3, ge=0)
    timeout_per_trial: float | None = Field(default=None, gt=0)
    # seconds of wall clock for the whole search, from `hpo tune` (or `hpo submit`): no trial starts
    # that the rest cannot fit, running ones end at their next epoch's end and are kept
    timeout: float | None = Field(default=None, gt=0)
    sampler: SamplerSpec = Field(default_factory=SamplerSpec)
    pruner: PrunerSpec = Field(default_factory=PrunerSpec)
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
            raise _problem(f"must start with a letter or digit: it names a folder under output_dir (got {name!r})")
        return name

    @property
    def source(self) -> str:
        """The study file this spec was loaded from, for messages and logs."""
        return self._source

    def study_dir(self, uid: str) -> Path:
        """The trial folders' parent for the study with this ``uid`` (``hpo.study.study_uid``)."""
        return outputs.study_dir(self.output_dir, self.name, uid)

    @property
    def gpus_per_trial(self) -> int:
        """The most GPUs any trial of this spec can ask for."""
        searched = self.search_space.get("gpus_per_trial")
        if searched is None:
            return int(self.train.get("gpus_per_trial", 1))
        return int(max(searched.choices) if isinstance(searched, CategoricalParam) else searched.high)

    def applies(self, name: str, values: Mapping[str, object]) -> bool:
        """Whether searched parameter ``name`` is sampled when the earlier ones took ``values``
        (a parent that was not sampled itself fails the condition)."""
        when = self.search_space[name].when or {}
        return all(parent in values and _one_of(values[parent], allowed) for parent, allowed in when.items())

    def train_config(self, params: Mapping[str, object], checkpoint_dir: str | None) -> TrainConfig:
        """The plain config of one trial: the fixed settings plus its sampled ``params``;
        a conditional parameter that was not sampled keeps the TrainConfig default."""
        expected = [name for name in self.search_space if self.applies(name, params)]
        if set(params) != set(expected):
            raise ValueError(f"params {sorted(params)} do not match the search space's applicable {sorted(expected)}")
        settings = {**self.train, **params}
        settings["encoder"] = self.model_paths.get(settings["encoder"], settings["encoder"])
        return self._build(settings, checkpoint_dir)

    def _build(self, settings: Mapping[str, object], checkpoint_dir: str | None = None) -> TrainConfig:
        return _TRAIN_CONFIG.validate_python({"task": self.task, "data_dir": self.data_dir,
                                              "objective_metric": self.metric, "checkpoint_dir": checkpoint_dir,
                                              **settings})

    @model_validator(mode="after")
    def _check_settings(self) -> StudySpec:
        for name in self.train:
            _check_settable(name, at=f"train.{name}")
        for name, param in self.search_space.items():
            _check_settable(name, at=f"search_space.{name}")
            if name in self.train:
                raise _problem("is also fixed in train; set it in one place", at=f"search_space.{name}")
            if name in _INTEGER_FIELDS and isinstance(param, FloatParam):
                raise _problem("is an integer setting; use type: int", at=f"search_space.{name}.type")
        self._check_conditions()
        for index, point in enumerate(self.warm_start):
            problem = self.point_problem(point)
            if problem:
                raise _problem(problem[1], at=f"warm_start.{index}.{problem[0]}".rstrip("."))
        if "encoder" not in self.train and "encoder" not in self.search_space:
            raise _problem("is required: fix it in train or search it in search_space", at="train.encoder")
        for key in ("metric", "prune_on"):
            metric = getattr(self, key) or ""
            if self.task == "evidence" and metric.startswith("post_"):
                raise _problem(f"{metric} is a post-level metric, only for task criteria", at=key)
            if self.task == "criteria" and metric.startswith("recall_at_"):
                raise _problem(f"{metric} ranks sentences, only for task evidence", at=key)
        if self.prune_on and self.direction == "minimize":
            raise _problem("every metric is higher-is-better: prune_on needs direction: maximize", at="prune_on")
        self._probe_train_configs()
        return self

    def _check_conditions(self) -> None:
        names = list(self.search_space)
        for name, param in self.search_space.items():
            for parent, allowed in (param.when or {}).items():
                at = f"search_space.{name}.when.{parent}"
                if parent not in self.search_space:
                    raise _problem(_not_searched(parent, names, self.train,
                                                 need="; a condition names an earlier searched parameter"), at=at)
                if cycle := self._cycle(name, parent):
                    raise _problem(f"forms a cycle {' -> '.join(cycle)}; drop one of these conditions", at=at)
                if names.index(parent) > names.index(name):
                    raise _problem(f"is listed after {name}; list {parent} first in search_space", at=at)
                for value in allowed:
                    if problem := _value_problem(self.search_space[parent], value, parent, condition=True):
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
            return "", "must be a mapping of searched parameters to values, e.g. {learning_rate: 2.0e-5}"
        for name, value in point.items():
            if name not in self.search_space:
                return name, _not_searched(name, list(self.search_space), self.train)
            if problem := _value_problem(self.search_space[name], _as_number(value), name):
                return name, problem
            if not self.applies(name, point):
                return name, (f"applies only when {self.search_space[name].condition_text()}; "
                              "set that too, or leave this out")
        return None

    def typed_point(self, point: Mapping[str, object]) -> dict[str, object]:
        """A checked ``point`` with its numbers as the search space takes them ("2e-5" and
        an int in a float range become floats, 3.0 in an int range 3), as Optuna must be given them."""
        typed = {name: _as_number(value) for name, value in point.items()}
        as_type = {FloatParam: float, IntParam: int}
        return {name: as_type.get(type(self.search_space[name]), lambda same: same)(value)
                for name, value in typed.items()}

    def _probe_train_configs(self) -> None:
        """Build TrainConfigs from the fixed settings and every value range end and choice.

        Catches wrong types (``epochs: "two"``) and bad values (``batch_size: 0``) before
        any trial runs, naming the key that holds them.
        """
        candidates = {name: _candidates(param) for name, param in self.search_space.items()}
        first = {name: values[0] for name, values in candidates.items()}
        self._probe({**self.train, **first}, blame=None)
        for name, values in candidates.items():
            for value in values[1:]:
                self._probe({**self.train, **first, name: value}, blame=name)

    def _probe(self, settings: Mapping[str, object], blame: str | None) -> None:
        try:
            self._build(settings)
        except ValidationError as error:
            first_error = error.errors()[0]
            field = str(first_error["loc"][0]) if first_error["loc"] else None
            name = blame or field
            if name in self.search_space:
                raise _problem(f"{name}={settings[name]!r} is invalid: {_problem_text(first_error)}",
                               at=f"search_space.{name}") from None
            raise _problem(_problem_text(first_error), at=f"train.{field}" if field else "train") from None


def _one_of(value: object, allowed: Sequence[object]) -> bool:
    # by type too, as choices are: a condition on 1 is not met by true
    return any(value == a and isinstance(value, bool) == isinstance(a, bool) for a in allowed)


def _not_searched(name: str, searched: list[str], train: Mapping[str, object], need: str = "") -> str:
    if name in train:
        return f"'{name}' is fixed in train, not searched{need}"
    close = difflib.get_close_matches(name, searched, n=1)
    return f"'{name}' is not in search_space{need}" + (f"; did you mean '{close[0]}'?" if close else "")


def _value_problem(param: Param, value: object, name: str, condition: bool = False) -> str | None:
    """Why ``value`` is not a value ``param`` can take, or None."""
    if isinstance(param, CategoricalParam):
        if _one_of(value, param.choices):
            return None
        return f"{value!r} is not one of {name}'s choices {list(param.choices)}"
    if condition and isinstance(param, FloatParam):
        return f"{name} is a float range; a condition needs a categorical or int parameter"
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is None or (isinstance(param, IntParam) and number != int(number)):
        return f"{value!r} is not {'an integer' if isinstance(param, IntParam) else 'a number'} for {name}"
    if not param.low <= number <= param.high:
        return f"{name}={value!r} is outside its range [{param.low}, {param.high}]"
    if param.step and abs((number - param.low) / param.step - round((number - param.low) / param.step)) > 1e-9:
        return f"{name}={value!r} is not on its grid (low {param.low}, step {param.step})"
    return None


def _candidates(param: Param) -> tuple[object, ...]:
    return param.choices if isinstance(param, CategoricalParam) else (param.low, param.high)


def _check_settable(name: str, at: str) -> None:
    if name in _FROM_TOP_LEVEL:
        raise _problem(f"comes from the top-level '{_FROM_TOP_LEVEL[name]}' key", at=at)
    if name in _FINALIZE_ONLY:
        raise _problem("is set by hpo finalize --refit train+val, never in a search (it would judge itself on "
                       "data it trained on)", at=at)
    if name not in SETTABLE_FIELDS:
        close = difflib.get_close_matches(name, SETTABLE_FIELDS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise _problem(f"is not a TrainConfig setting{hint}", at=at)


def _locate(error: ErrorDetails) -> tuple[str, str]:
    """One pydantic error as (dotted key path, problem)."""
    loc = list(error["loc"])
    if loc[:1] == ["search_space"] and len(loc) > 2 and loc[2] in _PARAM_TYPES:
        del loc[2]  # the union's tag is pydantic's, not a key the user wrote
    at = (error.get("ctx") or {}).get("at")
    return ".".join(map(str, [*loc, at] if at else loc)) or "top level", _problem_text(error)


def _problem_text(error: ErrorDetails) -> str:
    kind, given = error["type"], error["input"]
    if kind == "extra_forbidden":
        return "unknown key, not allowed"
    if kind == "missing":
        return "is required"
    if kind == "union_tag_not_found":
        return "needs a type: float, int or categorical"
    if kind == "value_error":  # raised by TrainConfig.__post_init__
        return str(error["ctx"]["error"])
    if kind == "spec" or not isinstance(given, _SCALARS):
        return error["msg"]
    return f"{error['msg']} (got {given!r})"


def parse_override(text: str) -> tuple[list[str], object]:
    """``"train.epochs=2"`` -> ``(["train", "epochs"], 2)``; the value is read as YAML."""
    key, equals, value = text.partition("=")
    keys = [part.strip() for part in key.split(".")]
    if not equals or not all(keys):
        raise SpecError(f"override {text!r}: expected the form key=value, e.g. train.epochs=2")
    try:
        return keys, _as_number(yaml.safe_load(value))
    except yaml.YAMLError:
        raise SpecError(f"override {text!r}: the value is not valid YAML") from None


def load_spec(path: str | Path, overrides: Sequence[str] = (), storage: StorageUrl | str | None = None,
              env: Mapping[str, str] | None = None) -> StudySpec:
    """Read, override and validate a study file; ``storage`` (the CLI flag) wins over
    ``$HPO_STORAGE``, which wins over the file, which wins over the default."""
    source = str(path)
    document = _read_mapping(Path(path))
    for text in overrides:
        try:
            keys, value = parse_override(text)
        except SpecError as error:
            raise SpecError(f"{source}: {error}") from None
        _set(document, keys, value, source)
    from_file = document.get("storage")
    if from_file is None or isinstance(from_file, str):  # else pydantic names the wrong type
        document["storage"] = StorageUrl.resolve(storage, from_file, env)
    try:
        spec = StudySpec.model_validate(document)
    except ValidationError as error:
        raise SpecError(f"{source}: " + "; ".join(": ".join(_locate(e)) for e in error.errors())) from None
    spec._source = source
    return spec


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such study file") from None
    except OSError as error:
        raise SpecError(f"{path}: cannot read the study file: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise SpecError(f"{path}: byte {error.start}: not valid UTF-8; save the study file as UTF-8") from None
    try:
        document = _UniqueKeyLoader.read(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        problem = getattr(error, "problem", None) or str(error).replace("\n", " ")
        raise SpecError(f"{path}: {where}: invalid YAML: {problem}") from None
    if not isinstance(document, dict):
        found = "an empty file" if document is None else f"a {type(document).__name__}"
        raise SpecError(f"{path}: top level: must be a mapping of keys (name:, task:, ...), not {found}")
    return document


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; in a study file that is a typo, not a wish.
    A SafeLoader: it builds plain data only."""

    @classmethod
    def read(cls, text: str) -> object:
        loader = cls(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}; keep one", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _set(document: dict[str, Any], keys: list[str], value: object, source: str) -> None:
    node = document
    for depth, key in enumerate(keys[:-1]):
        if node.get(key) is None:  # a missing key, or an empty `train:` in the file
            node[key] = {}
        node = node[key]
        if not isinstance(node, dict):
            raise SpecError(f"{source}: {'.'.join(keys[:depth + 1])}: is not a mapping, cannot set {'.'.join(keys)}")
    node[keys[-1]] = value
