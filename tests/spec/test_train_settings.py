"""Which TrainConfig fields a study's ``train`` and ``search_space`` may set, and the defaults a
trial takes for those its study leaves alone."""

from __future__ import annotations

import dataclasses

import pytest

from hpo.spec import SETTABLE_FIELDS, SpecError, load_spec
from hpo.spec._train_settings import TRAIN_DEFAULTS
from hpo.train.config import TrainConfig
from tests.support.study_files import BASE, changed, write


def test_a_study_sets_every_training_field_but_those_that_come_from_elsewhere():
    assert SETTABLE_FIELDS <= TrainConfig.field_names()
    assert {"learning_rate", "epochs", "max_length", "pooling"} <= SETTABLE_FIELDS
    # the top level, hpo finalize and the fidelity section set these
    elsewhere = {"task", "data_dir", "objective_metric", "checkpoint_dir"}
    elsewhere |= {"train_on", "cv_fold", "train_share"}
    assert elsewhere <= TrainConfig.field_names() and not elsewhere & SETTABLE_FIELDS


def test_the_defaults_are_train_configs_own():
    config = TrainConfig(encoder="tiny", task="criteria", data_dir="data")
    for name, default in TRAIN_DEFAULTS.items():
        assert getattr(config, name) == default, name
    required = {f.name for f in dataclasses.fields(TrainConfig)} - TRAIN_DEFAULTS.keys()
    assert "encoder" in required and "learning_rate" not in required


@pytest.mark.parametrize(
    ("edit", "key", "problem"),
    [
        (("train.data_dir", "elsewhere"), "train.data_dir", "comes from the top-level 'data_dir'"),
        (("train.cv_fold", 1), "train.cv_fold", "is set by hpo finalize --refit train+val"),
        (("train.train_share", 0.5), "train.train_share", "set fidelity.train_share instead"),
        (("train.learning_rat", 1e-3), "train.learning_rat", "did you mean 'learning_rate'?"),
        (
            ("search_space.zzzz", {"type": "int", "low": 0, "high": 1}),
            "search_space.zzzz",
            "is not a TrainConfig setting",
        ),
    ],
)
def test_a_field_a_study_may_not_set_is_named_with_where_it_comes_from(
    tmp_path, edit, key, problem
):
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, changed(edit)), env={})
    message = str(caught.value)
    assert f" {key}: " in message and problem in message, message


def test_a_setting_the_study_leaves_alone_takes_the_default(tmp_path):
    spec = load_spec(write(tmp_path, BASE), env={})
    assert (spec.setting("epochs"), spec.setting("max_length")) == (3, 128)  # the file's
    assert (
        spec.setting("weight_decay") == TRAIN_DEFAULTS["weight_decay"] == TrainConfig.weight_decay
    )
