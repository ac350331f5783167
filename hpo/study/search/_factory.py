"""The spec's sampler and pruner: which Optuna class each name means, the options checked
against its annotations, and the rungs where the pruner judges trials."""

from __future__ import annotations

import inspect
import zlib

import optuna

from hpo.spec import CategoricalParam, SpecError, StudySpec
from hpo.study.search._strategy import staged_sampler

_SAMPLERS = {
    "tpe": optuna.samplers.TPESampler,
    "gp": optuna.samplers.GPSampler,
    "random": optuna.samplers.RandomSampler,
    "cmaes": optuna.samplers.CmaEsSampler,
}
_PRUNERS = {
    "median": optuna.pruners.MedianPruner,
    "hyperband": optuna.pruners.HyperbandPruner,
    "successive_halving": optuna.pruners.SuccessiveHalvingPruner,
    "none": optuna.pruners.NopPruner,
}


def make_sampler(spec: StudySpec, worker: str = "", start: int = 0) -> optuna.samplers.BaseSampler:
    """Each worker seeds its sampler differently: N workers with one seed would propose
    the same parameters N times. ``start``: how many times a worker of this name opened the
    study before (``open_study`` counts them); see ``worker_seed``."""
    if spec.sampler.name == "cmaes" and spec.storage.is_grpc:
        raise SpecError(
            f"{spec.source}: sampler.name: cmaes unpickles its state from the storage, "
            "and the storage proxy has no authentication, so anyone reaching it could run "
            "code on every worker; use tpe or gp, or connect the workers to the database directly"
        )
    # auto's options are its TPE's, the sampler a study ends with
    sampler_class = _SAMPLERS.get(spec.sampler.name, optuna.samplers.TPESampler)
    seed = worker_seed(spec.sampler.seed, worker, start)
    _check_option_types(sampler_class, spec.sampler.options, f"{spec.source}: sampler.options")
    try:
        sampler = sampler_class(seed=seed, **spec.sampler.options)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{spec.source}: sampler.options: {exc}") from None
    return staged_sampler(spec, sampler, seed) if spec.sampler.name == "auto" else sampler


def worker_seed(seed: int | None, worker: str, start: int = 0) -> int | None:
    """The seed of ``worker``'s sampler: the spec's, offset by the worker's name, and from its
    second start on the study (a resumed study, a second `hpo tune` beside the first) by that
    start's number too. Without the start a resumed worker replayed its first run's samples
    (Optuna's random startup draws the same sequence for the same seed, whatever the history);
    a fresh study's first run still takes its seeds from the spec's alone."""
    if seed is None or not worker:
        return seed
    seed += zlib.crc32(worker.encode()) % 100_000
    if start:
        seed += zlib.crc32(f"{worker}#{start}".encode())
    return seed % 2**32  # numpy's generators take seeds below 2**32


def make_pruner(spec: StudySpec) -> optuna.pruners.BasePruner:
    """The spec's Optuna pruner; its defaults (the first rung, Hyperband's max_resource) are
    ``PrunerSpec.optuna_options``'."""
    try:
        if spec.pruner.name == "patient":
            options = spec.pruner.patient_options()
            _check_option_types(
                _PRUNERS[options.wrapped.name],
                options.wrapped.options,
                f"{spec.source}: pruner.options.wrapped.options",
            )
            wrapped = _PRUNERS[options.wrapped.name](**options.wrapped.options)
            return optuna.pruners.PatientPruner(wrapped, patience=options.patience)
        _check_option_types(
            _PRUNERS[spec.pruner.name], spec.pruner.options, f"{spec.source}: pruner.options"
        )
        return _PRUNERS[spec.pruner.name](**spec.pruner.optuna_options(longest_epochs(spec)))
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{spec.source}: pruner.options: {exc}") from None


def longest_epochs(spec: StudySpec) -> int:
    """The most epochs any trial of ``spec`` trains: the top of a searched ``epochs``, else the
    fixed one."""
    searched = spec.search_space.get("epochs")
    if searched is None:
        return int(spec.setting("epochs"))
    return int(max(searched.choices) if isinstance(searched, CategoricalParam) else searched.high)


def rung_schedule(spec: StudySpec) -> tuple[int, ...]:
    """The steps (in 1/``pruner.units_per_epoch`` of an epoch) where the spec's pruner judges
    trials: every trial is evaluated at each one it reaches, so trials are compared at the same
    amount of training. Empty for a pruner that judges every epoch's report instead."""
    return spec.pruner.rungs(longest_epochs(spec))


def first_look_epochs(spec: StudySpec) -> float | None:
    """The epochs a trial trains before the spec's pruner first judges it: its first rung.
    None for a pruner without rungs (median waits for finished trials, none never judges)."""
    rungs = rung_schedule(spec)
    return rungs[0] / spec.pruner.units_per_epoch if rungs else None


# The option types Optuna's annotations name that are checked here; others (functions,
# "str | int") are left to it.
_WANTED = {
    "bool": ("true or false", lambda value: isinstance(value, bool)),
    "int": ("an integer", lambda value: isinstance(value, int) and not isinstance(value, bool)),
    "float": (
        "a number",
        lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
    ),
}


def _check_option_types(optuna_class: type, options: dict, where: str) -> None:
    """Name an option of the wrong type and the type it wants (from the class's annotations):
    Optuna takes ``n_startup_trials: abc`` and fails only mid-sampling, with "'<' not
    supported between instances of 'int' and 'str'"."""
    parameters = inspect.signature(optuna_class).parameters
    for name, value in options.items():
        if name not in parameters:
            continue  # Optuna's own TypeError names it
        annotation = parameters[name].annotation
        kinds = {
            kind.strip() for kind in getattr(annotation, "__name__", str(annotation)).split("|")
        }
        wanted = _WANTED.get(next(iter(kinds - {"None"}))) if len(kinds - {"None"}) == 1 else None
        if wanted and not wanted[1](value) and not (value is None and "None" in kinds):
            raise SpecError(f"{where}.{name}: expected {wanted[0]}, got {value!r}")
