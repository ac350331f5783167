"""The spec's search space as Optuna suggestions, and a dry run of its sampler."""

from __future__ import annotations

import optuna

from hpo.spec import CategoricalParam, FloatParam, IntParam, SpecError, StudySpec
from hpo.study.records._trials import enqueue
from hpo.study.search._factory import make_pruner, make_sampler

DRY_RUN_POINTS = 3


def suggest(trial: optuna.Trial, spec: StudySpec) -> dict[str, object]:
    """One point of the spec's search space, chosen by the trial's sampler. Parents come
    before their conditional children (the spec checks the order), so a child is asked
    for only when its condition holds and is absent from the trial's params otherwise."""
    params: dict[str, object] = {}
    for name, param in spec.search_space.items():
        if not spec.applies(name, params):
            continue
        if isinstance(param, FloatParam):
            params[name] = trial.suggest_float(
                name, param.low, param.high, log=param.log, step=param.step
            )
        elif isinstance(param, IntParam):
            params[name] = trial.suggest_int(
                name, int(param.low), int(param.high), log=param.log, step=int(param.step or 1)
            )
        elif isinstance(param, CategoricalParam):
            params[name] = trial.suggest_categorical(name, list(param.choices))
    return params


def sample_points(spec: StudySpec, n: int = DRY_RUN_POINTS) -> list[dict[str, object]]:
    """The warm start's points, completed as the study completes them, then ``n`` points
    sampled by the spec's own sampler and pruner, on a throw-away in-memory study: the first
    trials the real study runs, in its order. A sampler option that is only used while
    sampling (``n_startup_trials: abc``) fails here, before any real study exists."""
    sampler, pruner = make_sampler(spec), make_pruner(spec)
    verbosity = optuna.logging.get_verbosity()
    # the throw-away study is no news to the user
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    points = []
    try:
        study = optuna.create_study(direction=spec.direction, sampler=sampler, pruner=pruner)
        for point in spec.warm_start:
            enqueue(study, spec, point)
        for index in range(len(spec.warm_start) + n):
            trial = study.ask()
            points.append(suggest(trial, spec))
            trial.report(0.5, step=1)
            trial.should_prune()
            study.tell(trial, 0.5 + index / 100)
    except (TypeError, ValueError) as exc:
        raise SpecError(
            f"{spec.source}: sampler or pruner options: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        optuna.logging.set_verbosity(verbosity)
    return points
