"""classifier.json as a whole: its parts must describe one model, and its seal ties the
settings to the weight files they were saved with (the inference block alone:
test_inference.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from hpo.data import SYMPTOMS
from hpo.models.classifier_file import (
    ModelFolderChanged,
    read_checked,
    read_classifier_file,
    rewrite_inference,
)
from hpo.models.inference import InvalidClassifierFile
from tests.support.inference_settings import HALF, HEAD, sealed_folder, settings


def test_the_file_must_describe_one_model():
    head = HEAD
    seal = {"scheme": "sha256-sampled-1", "files": {}, "digest": "0" * 64}  # its shape only
    meta = {
        "format": 1,
        "task": "criteria",
        "head": head,
        "inference": settings().to_json(),
        "integrity": seal,
    }
    assert read_classifier_file(meta).inference == settings()
    for edit, field in (
        (dict(task="evidence"), "task"),
        (dict(head={**head, "num_labels": 9}), "head.num_labels"),
        (dict(head={**head, "hidden_size": "8"}), "head.hidden_size"),  # strict: text is no width
        (dict(head={**head, "activation": "swish"}), "head.activation"),
        (dict(head={**head, "dropuot": 0.1}), "head.dropuot"),
    ):
        with pytest.raises(InvalidClassifierFile) as error:
            read_classifier_file({**meta, **edit})
        assert error.value.field == field


def test_a_sealed_folder_reads_back_and_an_edit_of_its_settings_is_refused(tmp_path):
    folder = sealed_folder(tmp_path)
    assert read_checked(folder, weights=True).inference == settings()
    path = folder / "classifier.json"
    saved = path.read_text()
    meta = json.loads(saved)
    assert set(meta["integrity"]["files"]) == {
        "head.safetensors",
        "encoder/model.safetensors",
        "tokenizer/vocab.json",
    }
    labels = meta["inference"]["labels"]
    labels[0], labels[1] = labels[1], labels[0]  # still a valid file: two labels swapped
    path.write_text(json.dumps(meta))
    with pytest.raises(ModelFolderChanged, match="was edited after hpo saved it"):
        read_checked(folder)
    unsealed = {k: v for k, v in json.loads(saved).items() if k != "integrity"}
    path.write_text(json.dumps(unsealed))  # a seal removed: hpo seals every model it saves
    with pytest.raises(InvalidClassifierFile, match="integrity"):
        read_checked(folder)


def test_a_weight_file_changed_or_added_after_sealing_is_refused(tmp_path):
    folder = sealed_folder(tmp_path)
    (folder / "encoder" / "model.safetensors").write_bytes(b"other weights!!")
    read_checked(folder)  # the settings alone read no weight
    with pytest.raises(ModelFolderChanged, match="model.safetensors is not the file saved"):
        read_checked(folder, weights=True)
    folder = sealed_folder(tmp_path / "again")
    (folder / "tokenizer" / "special_tokens_map.json").write_text("{}")
    with pytest.raises(ModelFolderChanged, match="is not among the files saved"):
        read_checked(folder)
    (folder / "tokenizer" / "special_tokens_map.json").unlink()
    (folder / "tokenizer" / "vocab.json").unlink()
    with pytest.raises(ModelFolderChanged, match="vocab.json, saved with .* is missing"):
        read_checked(folder)


def test_new_thresholds_are_written_and_sealed_again(tmp_path):
    folder = sealed_folder(tmp_path)
    moved = dataclasses.replace(settings(), thresholds={**HALF, SYMPTOMS[0]: 0.3})
    rewrite_inference(folder, moved)
    assert read_checked(folder, weights=True).inference.thresholds[SYMPTOMS[0]] == 0.3
