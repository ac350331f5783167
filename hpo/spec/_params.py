"""The search space: one parameter per searched setting (a float or int range, or
categorical choices), each optionally sampled only when earlier ones took given values."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import Field, FiniteFloat, field_validator, model_validator

from hpo.spec._base import _SCALARS, Scalar, _as_number, _problem, _Strict


class _Searched(_Strict):
    # Sampled only when each named earlier parameter took one of the listed values
    # (``when: {adapter: lora}``, ``when: {head_layers: [1, 2]}``); otherwise the TrainConfig
    # default.
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
        """``adapter is lora``, ``head_layers in 1, 2``: the condition as ``hpo validate``
        shows it."""
        return " and ".join(
            f"{parent} is {allowed[0]}"
            if len(allowed) == 1
            else f"{parent} in {', '.join(map(str, allowed))}"
            for parent, allowed in (self.when or {}).items()
        )


class _RangeParam(_Searched):
    low: FiniteFloat
    high: FiniteFloat
    log: bool = False
    step: FiniteFloat | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check_range(self) -> _RangeParam:
        if self.low == self.high:
            raise _problem(
                f"equals high ({self.high}); use a fixed train setting instead", at="low"
            )
        if self.low > self.high:
            raise _problem(f"must be less than high ({self.low} > {self.high})", at="low")
        if self.log and self.low <= 0:
            raise _problem(f"must be > 0 with log: true (got {self.low})", at="low")
        if self.log and self.step is not None:
            raise _problem("cannot be combined with log: true (Optuna forbids it)", at="step")
        if self.step is not None:
            self._step_reaches_high()
        return self

    def _step_reaches_high(self) -> None:
        """Optuna moves a high its step does not reach down to the last low + k * step, with
        only a warning (its _adjust_*_high, in decimals as here): refused instead, naming it."""
        low, high, step = (Decimal(str(value)) for value in (self.low, self.high, self.step))
        top = low + (high - low) // step * step
        if top == high:
            return
        show = dict(low=low, span=high - low, step=step, top=top, above=top + step)
        show = {name: f"{float(value):g}" for name, value in show.items()}
        if top == low:
            raise _problem(
                f"{show['step']} is more than high - low ({show['span']}), so only low "
                f"({show['low']}) would be searched; use a step of at most {show['span']}",
                at="step",
            )
        raise _problem(
            f"{show['step']} does not divide high - low ({show['span']}), so high would be "
            f"searched as {show['top']}; set high to {show['top']} or {show['above']}",
            at="step",
        )


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
                raise _problem(
                    f"must be a string, number, boolean or null, not a {type(choice).__name__}",
                    at=str(index),
                )
            if (type(choice), choice) in seen:  # by type too: 1 and true are different choices
                raise _problem(f"duplicate choice {choice!r}")
            seen.add((type(choice), choice))
        return [_as_number(choice) for choice in choices]


Param = Annotated[FloatParam | IntParam | CategoricalParam, Field(discriminator="type")]


def _one_of(value: object, allowed: Sequence[object]) -> bool:
    # by type too, as choices are: a condition on 1 is not met by true
    return any(value == a and isinstance(value, bool) == isinstance(a, bool) for a in allowed)


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
        return (
            f"{value!r} is not {'an integer' if isinstance(param, IntParam) else 'a number'} "
            f"for {name}"
        )
    if not param.low <= number <= param.high:
        return f"{name}={value!r} is outside its range [{param.low}, {param.high}]"
    if (
        param.step
        and abs((number - param.low) / param.step - round((number - param.low) / param.step)) > 1e-9
    ):
        return f"{name}={value!r} is not on its grid (low {param.low}, step {param.step})"
    return None


def _candidates(param: Param) -> tuple[object, ...]:
    return param.choices if isinstance(param, CategoricalParam) else (param.low, param.high)
