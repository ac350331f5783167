"""The main job from Python, as ``hpo tune`` and ``hpo finalize`` run it (Optuna's
``study.optimize`` and Ray Tune's ``Tuner.fit`` are what users of a search library expect).

    import hpo

    study = hpo.tune("studies/criteria-smoke.yaml", workers=2, timeout=1800)
    print(study.best_value, study.best_params)
    summary = hpo.finalize(study.study_name, top_k=1, seeds=2)
    print(summary["test"]["metrics"]["post_macro_f1"])

The same processes, checks and errors as the commands: workers are separate processes, a spec
or flag a command refuses raises ``hpo.errors.UsageError`` with the same one-line message. An
argument is checked as its flag is, by pydantic before anything runs, and named as it is
spelled here (``hpo.tune: workers: ...``): ``workers="2"`` is no worker count, as ``True`` is
none and ``"a=b"`` no list of overrides.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Sequence
from typing import Annotated, TypeVar

from pydantic import (
    BeforeValidator,
    ConfigDict,
    ValidationError,
    validate_call,
)
from pydantic_core import ErrorDetails

from hpo.errors import UsageError
from hpo.final.options import Folds
from hpo.option_types import Count, MemoryMb, Seconds, Threads
from hpo.validation import located
from hpo.vocabulary import Ensemble, Refit

_Function = TypeVar("_Function", bound=Callable)


def _checked(function: _Function) -> _Function:
    """``function`` with its arguments validated first, strictly (no "2" for 2), a wrong one
    raised as ``UsageError`` in one line naming the argument."""
    validated = validate_call(config=ConfigDict(strict=True))(function)
    positional = [
        name
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind is parameter.POSITIONAL_OR_KEYWORD
    ]

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return validated(*args, **kwargs)
        except ValidationError as exc:
            if exc.title != function.__name__:
                raise  # raised inside the run, not by its arguments
            error = exc.errors()[0]
            raise UsageError(f"hpo.{function.__name__}: {_problem(error, positional)}") from None

    return call  # type: ignore[return-value]


def _problem(error: ErrorDetails, positional: list[str]) -> str:
    """pydantic's ``error`` about an argument, the argument named as it is spelled here."""
    first, *rest = error["loc"]
    if error["type"] == "unexpected_positional_argument":
        return f"takes {', '.join(positional)} by position alone; pass the others by name"
    if error["type"] == "unexpected_keyword_argument":
        return f"{first}: no such argument"
    if isinstance(first, int):  # a positional argument: its name, not its place
        first = positional[first]
    where, problem = located({**error, "loc": (first, *rest)})
    return f"{where}: {problem}"


# The arguments' types: numbers as the option records take them (hpo.option_types), a spec path
# as a string or path.
SpecPath = Annotated[
    str, BeforeValidator(lambda path: os.fspath(path) if isinstance(path, os.PathLike) else path)
]


@_checked
def tune(
    spec: SpecPath,
    *,
    workers: Count = 1,
    overrides: Sequence[str] = (),
    storage: str | None = None,
    timeout: Seconds | None = None,
    threads: Threads | None = None,
    memory_per_worker_mb: MemoryMb | None = None,
    restart_dead: bool = False,
    allow_spec_change: bool = False,
    progress: bool = False,
):
    """Run the study of ``spec`` (a YAML file) with ``workers`` processes until it holds its
    ``n_trials`` or ``timeout`` (seconds, from when the study is opened) is spent; return
    the Optuna study. ``overrides``: ``"key=value"`` as ``--set`` takes them."""
    from hpo.errors import RunStopped
    from hpo.run.tune import TuneOptions
    from hpo.run.tune import tune as run_tune

    options = TuneOptions(
        workers=workers,
        threads=threads,
        memory_per_worker_mb=memory_per_worker_mb,
        restart_dead=restart_dead,
        allow_spec_change=allow_spec_change,
        progress=progress,
        timeout=timeout,
    )
    code, study = run_tune(spec, overrides, storage, options)
    if code != 0:
        raise RunStopped(f"hpo.tune: the study's workers ended with exit code {code}")
    return study


@_checked
def finalize(
    spec_or_study: SpecPath,
    *,
    top_k: Count | None = None,
    seeds: Count | None = None,
    workers: Count = 1,
    threads: Threads | None = None,
    cv: Folds | None = None,
    refit: Refit | None = None,
    ensemble: Ensemble | None = None,
    overrides: Sequence[str] = (),
    storage: str | None = None,
    partial: bool = False,
    progress: bool = False,
) -> dict:
    """Retrain the best configurations on new seeds, score the chosen model once on test and
    write ``final/`` (as ``hpo finalize``); ``spec_or_study`` is the spec file or the study's
    name; ``threads``: CPU threads per retraining (None: the cores split between ``workers``);
    the other keywords are ``hpo.final.options.FinalizeOptions``, as the flags are.
    Returns the summary that ``final/metrics.json`` holds."""
    from hpo.final.options import FinalizeOptions
    from hpo.final.pipeline import finalize as run_finalize

    try:
        options = FinalizeOptions(
            top_k=top_k,
            seeds=seeds,
            refit=refit,
            ensemble=ensemble,
            cv=cv,
            workers=workers,
            threads=threads,
            partial=partial,
            progress=progress,
        )
    except ValidationError:  # each keyword is checked already: only the pair can be wrong
        raise UsageError(
            "hpo.finalize: refit='train+val' retrains one model, so it cannot be an ensemble; "
            "pass ensemble='none' with it, or leave refit out"
        ) from None
    return run_finalize(spec_or_study, list(overrides), storage, options).to_json()
