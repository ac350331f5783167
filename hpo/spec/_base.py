"""What every part of a study file shares: the one error type, how a problem is located at
its dotted key path, and how YAML 1.1 numbers are read as people mean them."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict
from pydantic_core import ErrorDetails, PydanticCustomError

from hpo.errors import UsageError

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
    return (
        float(value)
        if isinstance(value, str) and _EXPONENT_NUMBER.fullmatch(value.strip())
        else value
    )


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Scalar = str | int | float | bool | None


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
