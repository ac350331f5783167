"""hpo/final/choose.py: what finalize says of the model it keeps."""

from __future__ import annotations

from hpo.final.choose import ensemble_line
from hpo.final.summary import Seed
from hpo.spec import StudySpec


def _spec(direction: str) -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": "s",
            "task": "criteria",
            "data_dir": "unused",
            "metric": "post_macro_f1",
            "direction": direction,
            "n_trials": 4,
            "train": {"encoder": "x"},
            "search_space": {"learning_rate": {"type": "float", "low": 1e-5, "high": 1e-3}},
        }
    )


def _seeds(*values: float) -> list[Seed]:
    return [Seed(seed=i, value=v, best_epoch=1, run=f"r{i}") for i, v in enumerate(values)]


def test_an_ensemble_worse_than_its_best_seed_is_said_and_kept():
    """Issue #55 item 16: an ensemble below its best seed on validation was chosen without a
    word."""
    line = ensemble_line(_spec("maximize"), 0.61, _seeds(0.60, 0.64))
    assert line.startswith("ensemble of 2 seeds: validation post_macro_f1 0.6100 (alone: ")
    assert "worse than its best seed (0.6400, seed 1) on validation, kept as the model" in line


def test_an_ensemble_at_least_as_good_as_every_seed_says_nothing_more():
    assert ensemble_line(_spec("maximize"), 0.65, _seeds(0.60, 0.64)).endswith(
        "(alone: 0.6000, 0.6400)"
    )
    assert "worse" not in ensemble_line(_spec("minimize"), 0.30, _seeds(0.35, 0.31))
    assert "seed 1" in ensemble_line(_spec("minimize"), 0.33, _seeds(0.35, 0.31))
