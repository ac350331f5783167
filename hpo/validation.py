"""One way to say what is wrong with a setting, for every pydantic model hpo validates (the
study file, a training config, a saved model's settings): its dotted key path and the
problem, ready for one line.

Field constraints are pydantic's; a rule across fields raises ``problem(text, at=key)`` from
the model's validator, so it is located at the key it blames like any other. Callers turn
pydantic's errors into ``(path, problem)`` with ``located``. Imports nothing from hpo.
"""

from __future__ import annotations

from pydantic_core import ErrorDetails, PydanticCustomError

_SCALARS = (str, int, float, bool, type(None))
_PROBLEM = "problem"  # the error type of problem(): its message is the whole story


def problem(text: str, at: str = "") -> PydanticCustomError:
    """A validation error at key ``at`` below the model being validated: pydantic's location
    stops at the model whose validator raised, ``at`` carries the rest."""
    return PydanticCustomError(_PROBLEM, "{problem}", {"problem": text, "at": at})


def located(error: ErrorDetails) -> tuple[str, str]:
    """One pydantic error as (dotted key path, problem); the path is "" for the whole input."""
    loc = [*error["loc"]]
    at = (error.get("ctx") or {}).get("at")
    return ".".join(map(str, [*loc, at] if at else loc)), problem_text(error)


def problem_text(error: ErrorDetails) -> str:
    """What is wrong, with the value given where it is short enough to show."""
    kind, given = error["type"], error["input"]
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        return "unknown key, not allowed"
    if kind in ("missing", "missing_argument"):
        return "is required"
    if kind == "value_error":  # a ValueError from a validator: its text is the message
        return str(error["ctx"]["error"])
    if kind == _PROBLEM or not isinstance(given, _SCALARS):
        return error["msg"]
    return f"{error['msg']} (got {given!r})"


__all__ = ["located", "problem", "problem_text"]
