"""What every part of a study file shares: the one error type, how a problem is located at
its dotted key path, and how YAML 1.1 numbers are read as people mean them."""

from __future__ import annotations

import difflib
import re
import types
from typing import Annotated, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import ErrorDetails

from hpo.errors import UsageError
from hpo.validation import located, problem_text
from hpo.validation import problem as _problem

_SCALARS = (str, int, float, bool, type(None))
_PARAM_TYPES = ("float", "int", "categorical")
# YAML 1.1 reads 1e-5 (no dot, or an unsigned exponent) as a string; nobody means that.
_EXPONENT_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


class SpecError(UsageError):
    """A study file, or an override of it, that cannot be used."""


def _as_number(value: object) -> object:
    return (
        float(value)
        if isinstance(value, str) and _EXPONENT_NUMBER.fullmatch(value.strip())
        else value
    )


def takes_numbers(hint: object) -> bool:
    """Whether a field typed ``hint`` holds a number (``int``, ``float | None``, ...) and not a
    boolean: pydantic's lax mode reads true as 1, so ``n_trials: yes`` would mean one trial."""
    if get_origin(hint) is Annotated:
        return takes_numbers(get_args(hint)[0])
    if get_origin(hint) in (Union, types.UnionType):
        members = get_args(hint)
        return bool not in members and any(takes_numbers(member) for member in members)
    return hint in (int, float)


def boolean_problem(value: object) -> str:
    return (
        f"must be a number, not a boolean (got {str(value).lower()}: YAML reads true, false, "
        "yes, no, on and off as booleans); give a number"
    )


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: object) -> object:
        for key, value in data.items() if isinstance(data, dict) else ():
            field = cls.model_fields.get(key)
            if isinstance(value, bool) and field and takes_numbers(field.annotation):
                raise _problem(boolean_problem(value), at=key)
        return data

    @model_validator(mode="before")
    @classmethod
    def _suggest_known_keys(cls, data: object) -> object:
        """A misspelt key names the one it was meant to be: pydantic's extra_forbidden error does
        not know the model's fields, so the typo is caught here, where they are known. A key
        like none of them is left to pydantic, which reports it beside the other problems."""
        for key in data if isinstance(data, dict) else ():
            if key not in cls.model_fields and (
                close := difflib.get_close_matches(str(key), list(cls.model_fields), n=1)
            ):
                raise _problem(f"unknown key, not allowed; did you mean '{close[0]}'?", at=key)
        return data


Scalar = str | int | float | bool | None


def _locate(error: ErrorDetails) -> tuple[str, str]:
    """One pydantic error as (dotted key path, problem), located as every hpo model is
    (``hpo.validation``), less the search-space union's tag: pydantic's, not a key the user
    wrote."""
    loc = list(error["loc"])
    if loc[:1] == ["search_space"] and len(loc) > 2 and loc[2] in _PARAM_TYPES:
        del loc[2]
    path, _ = located({**error, "loc": tuple(loc)})
    return path or "top level", _problem_text(error)


def _problem_text(error: ErrorDetails) -> str:
    if error["type"] == "union_tag_not_found":
        return "needs a type: float, int or categorical"
    return problem_text(error)
