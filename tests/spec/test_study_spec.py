"""StudySpec, the whole file: the shipped studies, conditional parameters, warm starts typed
as the space takes them, and the TrainConfig each sampled point gives."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from hpo.spec import StudySpec, load_spec
from hpo.train.config import TrainConfig
from tests.support.study_files import BASE, STUDIES, changed, first_values, write


def test_every_shipped_study_validates_and_builds_a_train_config():
    assert len(STUDIES) >= 4
    for path in STUDIES:
        spec = load_spec(path, env={})
        assert spec.name == path.stem
        assert isinstance(spec.train_config(first_values(spec), None), TrainConfig)


def test_the_supermax_studies_search_in_parallel_aware_conditional_warm_started_spaces():
    for path in STUDIES:
        spec = load_spec(path, env={})
        if not spec.name.endswith("-supermax"):
            continue
        assert spec.sampler.name == "auto"  # TPE (these options) once the budget allows
        assert spec.sampler.options == {"multivariate": True, "group": True, "constant_liar": True}
        assert spec.search_space["lora_r"].when == {"adapter": ("lora",)}
        assert spec.search_space["head_hidden_size"].when == {"head_layers": (1, 2)}
        assert {point["encoder"] for point in spec.warm_start} == set(
            spec.search_space["encoder"].choices
        )
        for point in spec.warm_start:
            config = spec.train_config(first_values(spec, given=spec.typed_point(point)), None)
            assert (
                config.learning_rate in (2e-5, 3e-5)
                and config.epochs == 3
                and config.weight_decay == 0.01
            )


def test_hyperband_resource_covers_every_searched_epoch_count():
    for path in STUDIES:
        spec = load_spec(path, env={})
        if spec.pruner.name == "hyperband":
            assert spec.pruner.options["max_resource"] == spec.search_space["epochs"].high


def test_train_config_maps_encoder_names_to_local_paths(tmp_path):
    spec = load_spec(write(tmp_path, BASE), env={})
    params = first_values(spec)
    config = spec.train_config(params, "trial_0")
    assert (config.encoder, config.epochs, config.max_length) == ("/models/tiny-roberta", 3, 128)
    assert (config.task, config.data_dir, config.objective_metric, config.checkpoint_dir) == (
        "criteria",
        "_runs/sample-data",
        "macro_f1",
        "trial_0",
    )
    assert (
        spec.train_config({**params, "encoder": "org/hub-model"}, None).encoder == "org/hub-model"
    )
    with pytest.raises(ValueError, match="do not match the search space"):
        spec.train_config({"learning_rate": 1e-3}, None)


def test_a_loaded_spec_is_frozen_and_knows_its_file(tmp_path):
    study = write(tmp_path, BASE)
    spec = load_spec(study, env={})
    assert spec.source == str(study)
    assert spec.study_dir("0123456789abcdef") == Path("_runs/studies/unit-spec-01234567")
    with pytest.raises(ValidationError):
        spec.n_trials = 1


def conditional_spec(tmp_path: Path) -> StudySpec:
    path = tmp_path / "study.yaml"  # in this key order: a condition names an earlier parameter
    path.write_text(
        yaml.safe_dump(
            changed(
                ("search_space.adapter", {"type": "categorical", "choices": ["full", "lora"]}),
                (
                    "search_space.lora_r",
                    {"type": "int", "low": 4, "high": 16, "when": {"adapter": "lora"}},
                ),
                (
                    "search_space.head_hidden_size",
                    {"type": "categorical", "choices": [32, 64], "when": {"head_layers": [1]}},
                ),
                ("warm_start", [{"adapter": "full", "learning_rate": "2e-4", "head_layers": 0}]),
            ),
            sort_keys=False,
        )
    )
    return load_spec(path, env={})


def test_a_condition_decides_which_parameters_apply(tmp_path):
    spec = conditional_spec(tmp_path)
    assert spec.search_space["lora_r"].when == {"adapter": ("lora",)}
    assert spec.applies("lora_r", {"adapter": "lora"}) and not spec.applies(
        "lora_r", {"adapter": "full"}
    )
    # a parent that was not sampled fails its children's conditions
    assert not spec.applies("lora_r", {})
    assert spec.search_space["head_hidden_size"].condition_text() == "head_layers is 1"


def test_an_unsampled_conditional_parameter_keeps_the_train_config_default(tmp_path):
    spec = conditional_spec(tmp_path)
    base = {"encoder": "tiny-roberta", "learning_rate": 1e-3, "pooling": "cls"}
    config = spec.train_config({**base, "head_layers": 0, "adapter": "full"}, None)
    assert (
        config.lora_r == TrainConfig.lora_r
        and config.head_hidden_size == TrainConfig.head_hidden_size
    )
    config = spec.train_config(
        {**base, "head_layers": 1, "head_hidden_size": 32, "adapter": "lora", "lora_r": 8}, None
    )
    assert (config.lora_r, config.head_hidden_size) == (8, 32)
    with pytest.raises(
        ValueError, match="applicable"
    ):  # a child given although its condition fails
        spec.train_config({**base, "head_layers": 0, "adapter": "full", "lora_r": 8}, None)


def test_warm_start_points_are_typed_as_the_search_space_takes_them(tmp_path):
    spec = conditional_spec(tmp_path)
    typed = spec.typed_point(spec.warm_start[0])
    assert typed == {"adapter": "full", "learning_rate": 2e-4, "head_layers": 0}
    assert isinstance(typed["learning_rate"], float)
