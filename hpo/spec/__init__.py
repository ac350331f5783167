"""A study file (YAML) loaded once into a frozen, validated ``StudySpec``.

Precedence: the file, then ``key.path=value`` overrides, then the storage URL from the
CLI or ``HPO_STORAGE``. Every problem is a ``SpecError`` on one line naming the file and
the dotted key path, so a typo fails at launch rather than at trial 300.

Plain data: loading a spec imports no torch, transformers or optuna. The parts, by job:
``_base`` (the error and where it is), ``_params`` (the search space), ``_sections``
(sampler, pruner, heartbeat, tracking, storage), ``_train_settings`` (which TrainConfig
fields a study sets, and their limits), ``_study_spec`` (the whole file) and ``_load`` (YAML,
overrides, precedence).
"""

from hpo.spec._base import Scalar, SpecError
from hpo.spec._load import (
    argv_overrides,
    load_spec,
    parse_override,
    set_flags,
    spec_from_document,
)
from hpo.spec._params import CategoricalParam, FloatParam, IntParam, Param
from hpo.spec._sections import (
    FidelitySpec,
    HeartbeatSpec,
    Metric,
    PatientOptions,
    PrunerSpec,
    SamplerSpec,
    StorageField,
    TrackingSpec,
)
from hpo.spec._study_spec import DEFAULT_OUTPUT_DIR, DEFAULT_STORAGE, StudySpec
from hpo.spec._train_settings import SETTABLE_FIELDS

__all__ = [
    "DEFAULT_OUTPUT_DIR",
    "DEFAULT_STORAGE",
    "SETTABLE_FIELDS",
    "CategoricalParam",
    "FidelitySpec",
    "FloatParam",
    "HeartbeatSpec",
    "IntParam",
    "Metric",
    "Param",
    "PatientOptions",
    "PrunerSpec",
    "SamplerSpec",
    "Scalar",
    "SpecError",
    "StorageField",
    "StudySpec",
    "TrackingSpec",
    "argv_overrides",
    "set_flags",
    "load_spec",
    "parse_override",
    "spec_from_document",
]
