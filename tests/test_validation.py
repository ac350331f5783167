"""One way to say what is wrong with a setting: its dotted key path and the problem, for
pydantic's own errors and for a rule across fields that blames one key."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hpo.validation import located, problem


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    low: float = 0.0
    high: float = 1.0

    @model_validator(mode="after")
    def _ordered(self) -> Inner:
        if self.low > self.high:
            raise problem(f"must be less than high ({self.low} > {self.high})", at="low")
        return self


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    n_trials: int = Field(default=1, ge=1)
    ranges: dict[str, Inner] = {}


def errors(document: dict) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(document)
    return [located(error) for error in caught.value.errors()]


def test_a_rule_across_fields_is_located_at_the_key_it_blames():
    found = errors({"name": "x", "ranges": {"lr": {"low": 2.0, "high": 1.0}}})
    assert found == [("ranges.lr.low", "must be less than high (2.0 > 1.0)")]


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({}, ("name", "is required")),
        ({"name": "x", "epochz": 3}, ("epochz", "unknown key, not allowed")),
        (
            {"name": "x", "n_trials": 0},
            ("n_trials", "Input should be greater than or equal to 1 (got 0)"),
        ),
        (
            {"name": "x", "ranges": {"lr": {"low": [1]}}},
            ("ranges.lr.low", "Input should be a valid number"),
        ),
        ({"name": "x", "ranges": []}, ("ranges", "Input should be a valid dictionary")),
    ],
)
def test_pydantics_errors_name_the_path_and_the_value_where_short(document, expected):
    assert errors(document) == [expected]
