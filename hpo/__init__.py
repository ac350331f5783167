"""hpo: hyperparameter optimisation for encoder classifiers on ReDSM5-format data.

``hpo.tune(spec, workers=...)`` and ``hpo.finalize(study)`` run the main job from Python
(``hpo.api``); ``hpo.predict`` and ``hpo.explain`` load and run saved models.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # lazily: `import hpo` (every worker and CLI call does) stays free of torch and optuna
    if name in ("tune", "finalize"):
        from hpo import api

        return getattr(api, name)
    raise AttributeError(f"module 'hpo' has no attribute {name!r}")
