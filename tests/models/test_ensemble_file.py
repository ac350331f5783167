"""ensemble.json: saved classifiers whose probabilities are averaged, written with their
members copied in, read back checked, and refused once edited or made of one model."""

from __future__ import annotations

import json

import pytest

from hpo.data import SYMPTOMS
from hpo.models.classifier_file import ModelFolderChanged
from hpo.models.ensemble_file import ENSEMBLE_FILE, is_ensemble, read_ensemble, write_ensemble
from hpo.models.inference import InvalidClassifierFile
from tests.support.inference_settings import HALF, sealed_folder

TUNED = {**HALF, SYMPTOMS[0]: 0.4}


def two_members(tmp_path):
    return {
        "seed-1": sealed_folder(tmp_path / "runs" / "1", b"first training"),
        "seed-2": sealed_folder(tmp_path / "runs" / "2", b"second training"),
    }


def test_an_ensemble_is_written_with_its_members_and_reads_back(tmp_path):
    folder = tmp_path / "ensemble"
    settings = write_ensemble(folder, two_members(tmp_path), TUNED, tuned=TUNED)
    assert is_ensemble(folder) and not is_ensemble(tmp_path / "runs" / "1")
    assert settings.thresholds == TUNED and settings.validation_thresholds == TUNED
    paths, read = read_ensemble(folder)
    assert paths == [folder / "members" / "seed-1", folder / "members" / "seed-2"]
    assert all((path / "head.safetensors").is_file() for path in paths)  # copied in
    assert read == settings


def test_an_edited_ensemble_json_or_member_is_refused(tmp_path):
    folder = tmp_path / "ensemble"
    write_ensemble(folder, two_members(tmp_path), HALF, tuned=None)
    path = folder / ENSEMBLE_FILE
    saved = json.loads(path.read_text())
    moved = json.loads(path.read_text())
    moved["inference"]["thresholds"][SYMPTOMS[0]] = 0.1
    path.write_text(json.dumps(moved))
    with pytest.raises(ModelFolderChanged, match="was edited after hpo wrote it"):
        read_ensemble(folder)
    for members, problem in (
        (["seed-1", "seed-1"], "seed-1 is listed twice"),
        (["seed-1", "../runs"], "is not a folder name"),
        (["seed-1", "seed-3"], "members/seed-3 holds no classifier.json"),
    ):
        path.write_text(json.dumps({**saved, "members": members}))
        with pytest.raises(InvalidClassifierFile, match=problem):
            read_ensemble(folder)
    path.write_text(json.dumps({**saved, "colour": "red"}))
    with pytest.raises(InvalidClassifierFile):
        read_ensemble(folder)


def test_members_that_are_one_model_or_predict_different_things_are_refused(tmp_path):
    same = {
        "a": sealed_folder(tmp_path / "a", b"one training"),
        "b": sealed_folder(tmp_path / "b", b"one training"),
    }
    with pytest.raises(InvalidClassifierFile, match="a and b are the same model"):
        write_ensemble(tmp_path / "ensemble", same, HALF, tuned=None)
    other = {
        "a": same["a"],
        "c": sealed_folder(tmp_path / "c", b"other training", data_fingerprint="cd" * 32),
    }
    with pytest.raises(InvalidClassifierFile, match="c's data_fingerprint differs"):
        write_ensemble(tmp_path / "ensemble", other, HALF, tuned=None)
    assert not (tmp_path / "ensemble").exists()
