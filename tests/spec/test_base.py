"""What every spec model shares: a misspelt key names the key it was meant to be, and an
exponent number YAML reads as a string is a float."""

from __future__ import annotations

import pytest
import yaml

from hpo.spec import SpecError, load_spec
from tests.support.study_files import changed, write


def test_exponent_numbers_yaml_reads_as_strings_are_floats(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(
        yaml.safe_dump(
            changed(("search_space.weight_decay", {"type": "categorical", "choices": [0.0, 0.01]}))
        )
        .replace("0.0001", "1e-4")
        .replace("0.01", "1e-2")
    )
    assert "low: 1e-4" in study.read_text()  # the string PyYAML does not read as a number
    spec = load_spec(study, env={})
    assert spec.search_space["learning_rate"].low == 1e-4
    assert spec.search_space["weight_decay"].choices == (0.0, 1e-2)


MISSPELT = {
    "top level": (("n_trial", 3), "n_trial", "n_trials"),
    "a section": (("sampler.sed", 1), "sampler.sed", "seed"),
    "a searched parameter": (
        ("search_space.learning_rate.hgih", 1.0),
        "search_space.learning_rate.hgih",
        "high",
    ),
    "heartbeat": (("heartbeat", {"intervl": 30}), "heartbeat.intervl", "interval"),
}


@pytest.mark.parametrize("edit, path, meant", MISSPELT.values(), ids=MISSPELT.keys())
def test_a_misspelt_key_names_the_key_it_was_meant_to_be(tmp_path, edit, path, meant):
    study = write(tmp_path, changed(edit))
    with pytest.raises(SpecError) as caught:
        load_spec(study, env={})
    message = str(caught.value)
    assert f" {path}: unknown key, not allowed; did you mean '{meant}'?" in message, message
    assert "\n" not in message


def test_a_key_like_no_known_one_gets_no_guess_and_every_problem_is_still_reported(tmp_path):
    study = write(tmp_path, changed(("zzzz", 1), ("n_trials", 0)))
    with pytest.raises(SpecError) as caught:
        load_spec(study, env={})
    message = str(caught.value)
    assert "zzzz: unknown key, not allowed" in message and "did you mean" not in message
    assert "n_trials: " in message
