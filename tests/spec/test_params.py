"""The search space's parameters, each read alone: a float or int range and categorical
choices, their checks, and the condition that makes one sampled only after earlier ones."""

from __future__ import annotations

import re

import pytest
from pydantic import TypeAdapter, ValidationError

from hpo.spec import CategoricalParam, FloatParam, IntParam, Param

PARAM = TypeAdapter(Param)


def test_the_type_picks_the_parameter_and_exponent_strings_are_numbers():
    learning_rate = PARAM.validate_python(
        {"type": "float", "low": "1e-5", "high": "1e-3", "log": True}
    )
    assert isinstance(learning_rate, FloatParam)
    assert (learning_rate.low, learning_rate.high, learning_rate.log) == (1e-5, 1e-3, True)
    layers = PARAM.validate_python({"type": "int", "low": 0, "high": 2, "step": 1})
    assert isinstance(layers, IntParam) and (layers.low, layers.high, layers.step) == (0, 2, 1)
    decay = PARAM.validate_python({"type": "categorical", "choices": [0.0, "1e-2"]})
    assert isinstance(decay, CategoricalParam) and decay.choices == (0.0, 0.01)


def test_one_and_true_are_two_choices_but_a_choice_twice_is_refused():
    assert PARAM.validate_python({"type": "categorical", "choices": [1, True]}).choices == (
        1,
        True,
    )
    with pytest.raises(ValidationError, match="duplicate choice 'cls'"):
        PARAM.validate_python({"type": "categorical", "choices": ["cls", "mean", "cls"]})
    with pytest.raises(ValidationError, match="must list at least one choice"):
        PARAM.validate_python({"type": "categorical", "choices": []})
    with pytest.raises(ValidationError, match="must be a string, number, boolean or null"):
        PARAM.validate_python({"type": "categorical", "choices": ["a", ["b"]]})


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"low": 1.0, "high": 1.0}, "equals high"),
        ({"low": 2.0, "high": 1.0}, "must be less than high"),
        ({"low": 0.0, "high": 1.0, "log": True}, "must be > 0 with log: true"),
        ({"low": 0.1, "high": 1.0, "log": True, "step": 0.1}, "cannot be combined with log"),
        ({"low": 0.0, "high": 1.0, "step": 0}, "greater than 0"),
        ({"low": 0.0, "high": float("inf")}, "finite number"),
    ],
)
def test_a_range_that_optuna_cannot_sample_is_refused(fields, problem):
    with pytest.raises(ValidationError, match=problem):
        PARAM.validate_python({"type": "float", **fields})


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        # Optuna warned and searched [0, 0]: one value where a range was written
        ({"type": "int", "low": 0, "high": 1, "step": 5}, "5 is more than high - low (1)"),
        ({"type": "float", "low": 0.0, "high": 0.2, "step": 0.5}, "only low (0) would be"),
        # Optuna warned and lowered high to 9
        ({"type": "int", "low": 0, "high": 10, "step": 3}, "high would be searched as 9; set"),
        # in decimals as Optuna computes it: 0.1 to 0.35 by 0.1 stops at 0.3
        ({"type": "float", "low": 0.1, "high": 0.35, "step": 0.1}, "searched as 0.3; set high"),
    ],
)
def test_a_step_that_would_shrink_the_range_is_refused(fields, problem):
    with pytest.raises(ValidationError, match=re.escape(problem)):
        PARAM.validate_python(fields)
    assert PARAM.validate_python({**fields, "high": fields["low"] + fields["step"]}).step


def test_an_int_range_takes_integers_only():
    with pytest.raises(ValidationError, match="int"):
        PARAM.validate_python({"type": "int", "low": 0.5, "high": 4})


def test_a_condition_lists_its_values_and_reads_as_validate_shows_it():
    param = PARAM.validate_python(
        {"type": "int", "low": 4, "high": 16, "when": {"adapter": "lora", "head_layers": [1, 2]}}
    )
    assert param.when == {"adapter": ("lora",), "head_layers": (1, 2)}
    assert param.condition_text() == "adapter is lora and head_layers in 1, 2"
    assert PARAM.validate_python({"type": "int", "low": 0, "high": 1}).condition_text() == ""
    for when, problem in (({}, "at least one parameter"), ({"adapter": []}, "non-empty list")):
        with pytest.raises(ValidationError, match=problem):
            PARAM.validate_python({"type": "int", "low": 4, "high": 16, "when": when})
