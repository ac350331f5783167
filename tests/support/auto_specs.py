"""A ``sampler: {name: auto}`` study (``auto_spec``) around a warm-start recipe, on the issue's
real-data search space, which the tests of the search plan, the portfolio and the staged sampler
share."""

from __future__ import annotations

from hpo.spec import StudySpec

RECIPE = {"learning_rate": 1.0e-4, "epochs": 4, "class_weighting": "balanced"}


SPACE = {  # the real-data study, its three settings the portfolio moves
    "learning_rate": {"type": "float", "low": 2.0e-5, "high": 3.0e-4, "log": True},
    "epochs": {"type": "int", "low": 2, "high": 4},
    "class_weighting": {"type": "categorical", "choices": ["balanced", "sqrt", "none"]},
    "head_dropout": {"type": "float", "low": 0.0, "high": 0.3},
}


def auto_spec(tmp_path=None, **fields) -> StudySpec:
    values = {
        "name": "auto",
        "task": "criteria",
        "data_dir": "unused",
        "n_trials": 12,
        "sampler": {"name": "auto", "seed": 0},
        "train": {"encoder": "x"},
        "search_space": SPACE,
        "warm_start": [RECIPE],
        **({"output_dir": str(tmp_path)} if tmp_path else {}),
        **fields,
    }
    return StudySpec.model_validate(values)
