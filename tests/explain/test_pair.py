"""Which criteria and evidence models may explain posts together: a criteria model and an
evidence model trained on the same criterion texts and data, checked before any weight loads."""

from __future__ import annotations

import pytest

from hpo.data import SYMPTOMS
from hpo.explain.pair import MismatchedPair, check_pair
from tests.support.inference_settings import sealed_folder

EVIDENCE = dict(formulation="evidence")


def refusal(criteria, evidence) -> str:
    with pytest.raises(MismatchedPair) as caught:
        check_pair(criteria, evidence)
    return str(caught.value)


@pytest.fixture
def pair(tmp_path):
    return sealed_folder(tmp_path / "criteria", b"criteria"), sealed_folder(
        tmp_path / "evidence", b"evidence", **EVIDENCE
    )


def test_models_of_one_study_pair_up(pair):
    assert check_pair(*pair) is None


def test_each_flag_must_name_a_model_of_its_task(pair):
    criteria, evidence = pair
    assert f"--criteria {evidence} is an evidence model" in refusal(evidence, evidence)
    assert f"--evidence {criteria} is a criteria model" in refusal(criteria, criteria)


def test_other_criterion_texts_are_named(pair, tmp_path):
    criteria, _ = pair
    texts = dict.fromkeys(SYMPTOMS, "a criterion") | {"FATIGUE": "Tired."}
    other = sealed_folder(tmp_path / "other", b"other", descriptions=texts, **EVIDENCE)
    said = refusal(criteria, other)
    assert "trained on different criterion texts (FATIGUE)" in said


def test_other_data_is_named_by_both_fingerprints(pair, tmp_path):
    criteria, _ = pair
    other = sealed_folder(tmp_path / "other", b"other", data_fingerprint="cd" * 32, **EVIDENCE)
    said = refusal(criteria, other)
    assert f"trained on different data (fingerprints {'ab' * 8} and {'cd' * 8})" in said


def test_a_model_saved_before_fingerprints_pairs_with_a_note_naming_it(pair, tmp_path):
    criteria, _ = pair
    old = sealed_folder(tmp_path / "old", b"old", data_fingerprint=None, **EVIDENCE)
    note = check_pair(criteria, old)
    assert note.startswith("cannot check that the two models were trained on the same data")
    assert f"{old} was saved before data fingerprints" in note
