"""The main job from Python, as ``hpo tune`` and ``hpo finalize`` run it (Optuna's
``study.optimize`` and Ray Tune's ``Tuner.fit`` are what users of a search library expect).

    import hpo

    study = hpo.tune("studies/criteria-smoke.yaml", workers=2, timeout=1800)
    print(study.best_value, study.best_params)
    summary = hpo.finalize(study.study_name, top_k=1, seeds=2)
    print(summary["test"]["metrics"]["post_macro_f1"])

The same processes, checks and errors as the commands: workers are separate processes, a spec
or flag a command refuses raises ``hpo.errors.UsageError`` with the same one-line message.
"""

from __future__ import annotations

from collections.abc import Sequence


def tune(
    spec: str,
    *,
    workers: int = 1,
    overrides: Sequence[str] = (),
    storage: str | None = None,
    timeout: float | None = None,
    threads: int | None = None,
    memory_per_worker_mb: int | None = None,
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


def finalize(
    spec_or_study: str,
    *,
    top_k: int | None = None,
    seeds: int | None = None,
    workers: int = 1,
    threads: int | None = None,
    cv: int | None = None,
    refit: str | None = None,
    ensemble: str | None = None,
    overrides: Sequence[str] = (),
    storage: str | None = None,
    partial: bool = False,
    progress: bool = False,
) -> dict:
    """Retrain the best configurations on new seeds, score the chosen model once on test and
    write ``final/`` (as ``hpo finalize``); ``spec_or_study`` is the spec file or the study's
    name; ``threads``: CPU threads per retraining (None: the cores split between ``workers``).
    Returns the summary that ``final/metrics.json`` holds."""
    from hpo.final.pipeline import finalize as run_finalize

    return run_finalize(
        spec_or_study,
        list(overrides),
        storage,
        top_k=top_k,
        seeds=seeds,
        workers=workers,
        threads=threads,
        refit=refit,
        ensemble=ensemble,
        cv=cv,
        partial=partial,
        progress=progress,
    )
