"""A small study file (``BASE``) and ways to edit and write it, which the spec's tests share, and
the shipped smoke study as the CLI loads it (``smoke_spec``), which the study's tests share."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from hpo.spec import CategoricalParam, StudySpec, load_spec
from tests.support import REPO

STUDIES = sorted((REPO / "studies").glob("*.yaml"))
SMOKE = REPO / "studies" / "criteria-smoke.yaml"

BASE = {
    "name": "unit-spec",
    "task": "criteria",
    "data_dir": "_runs/sample-data",
    "n_trials": 6,
    "storage": "sqlite:///from-file.db",
    "sampler": {"name": "tpe", "seed": 0, "options": {"n_startup_trials": 3}},
    "pruner": {"name": "median", "options": {}},
    "model_paths": {"tiny-roberta": "/models/tiny-roberta"},
    "train": {"epochs": 3, "max_length": 128},
    "search_space": {
        "encoder": {"type": "categorical", "choices": ["tiny-roberta", "org/hub-model"]},
        "learning_rate": {"type": "float", "low": 1.0e-4, "high": 3.0e-3, "log": True},
        "head_layers": {"type": "int", "low": 0, "high": 1},
        "pooling": {"type": "categorical", "choices": ["cls", "mean"]},
    },
}


def first_values(spec: StudySpec, given: dict[str, object] | None = None) -> dict[str, object]:
    """Each applicable parameter's ``given`` value, else its first choice or low end; parents
    before children, as sampling goes."""
    given = given or {}
    values: dict[str, object] = {}
    for name, param in spec.search_space.items():
        if spec.applies(name, values):
            first = param.choices[0] if isinstance(param, CategoricalParam) else param.low
            values[name] = given.get(name, first)
    return values


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def changed(*edits: tuple[str, object]) -> dict:
    """BASE with each (dotted key, value) set; a value of ``DELETE`` removes the key."""
    document = copy.deepcopy(BASE)
    for dotted, value in edits:
        *parents, last = dotted.split(".")
        node = document
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return document


DELETE = object()


def smoke_spec(
    *overrides: str, storage: str = "sqlite:///unused.db", name: str | None = None
) -> StudySpec:
    """The shipped smoke study with ``--set`` overrides, as the CLI would load it."""
    return load_spec(SMOKE, [*overrides, *([f"name={name}"] if name else [])], storage, env={})
