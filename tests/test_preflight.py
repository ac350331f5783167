"""Preflight's search-space checks against each encoder's config: every value a trial of an
encoder can get is judged, and only those (a parameter conditioned on another encoder is not)."""

from __future__ import annotations

import pytest
import yaml

from hpo.errors import UsageError
from hpo.fixtures import make_tiny_encoder
from hpo.run.preflight import _check_search_fits
from hpo.spec import load_spec


@pytest.fixture(scope="module")
def deep_roberta(tmp_path_factory):
    return make_tiny_encoder("roberta", tmp_path_factory.mktemp("deep"), layers=4)


def _spec(tmp_path, freeze_layers: dict, train: dict | None = None):
    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "preflight",
                "task": "criteria",
                "data_dir": "unused",
                "n_trials": 2,
                "train": train or {},
                "search_space": {
                    "encoder": {"type": "categorical", "choices": ["shallow", "deep"]},
                    "freeze_layers": freeze_layers,
                },
            }
        )
    )
    return load_spec(path, env={})


def test_a_parameter_conditioned_on_one_encoder_is_judged_against_that_encoder_only(
    tmp_path, tiny_roberta, deep_roberta
):
    spec = _spec(tmp_path, {"type": "int", "low": 0, "high": 4, "when": {"encoder": "deep"}})
    _check_search_fits(spec, "deep", str(deep_roberta))  # 4 layers: fits
    _check_search_fits(spec, "shallow", str(tiny_roberta))  # never gets freeze_layers > 0


def test_every_encoder_the_search_can_choose_is_judged(tmp_path, tiny_roberta, deep_roberta):
    spec = _spec(tmp_path, {"type": "int", "low": 0, "high": 4})
    _check_search_fits(spec, "deep", str(deep_roberta))
    with pytest.raises(UsageError) as caught:
        _check_search_fits(spec, "shallow", str(tiny_roberta))
    assert str(caught.value) == (
        "search_space.freeze_layers: freeze_layers=4 but encoder 'shallow' has 2 layers; "
        "use at most 2 for it"
    )


def test_an_unsampled_conditional_parameter_keeps_the_default_which_is_judged_too(
    tmp_path, tiny_roberta
):
    """max_length searched only under a condition: a trial where it is not sampled trains at
    the TrainConfig default (256), which must fit as well."""
    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "preflight",
                "task": "criteria",
                "data_dir": "unused",
                "n_trials": 2,
                "train": {"encoder": "shallow"},
                "search_space": {
                    "long_text": {"type": "categorical", "choices": ["truncate", "chunks"]},
                    "max_length": {
                        "type": "int",
                        "low": 64,
                        "high": 128,
                        "when": {"long_text": "chunks"},
                    },
                },
            }
        )
    )
    spec = load_spec(path, env={})
    _check_search_fits(spec, "shallow", str(tiny_roberta))  # 256 <= 512
    small = make_tiny_encoder("roberta", tmp_path / "small", max_positions=130)  # 128 positions
    with pytest.raises(UsageError, match="max_length=256 but encoder 'shallow' has 128 positions"):
        _check_search_fits(spec, "shallow", str(small))
