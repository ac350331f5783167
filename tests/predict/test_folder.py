"""A model folder read before any weight loads: what is not a saved model is one line naming
the folder and what it lacks."""

from __future__ import annotations

import pytest

from hpo.predict import read_settings
from hpo.predict._folder import NotAModel


def refusal(path) -> str:
    with pytest.raises(NotAModel) as caught:
        read_settings(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message


def test_a_missing_folder_or_a_file_is_named_as_what_it_is(tmp_path):
    assert "no such folder" in refusal(tmp_path / "absent")
    (tmp_path / "model.bin").write_bytes(b"weights")
    assert "a file, not a folder" in refusal(tmp_path / "model.bin")


def test_a_folder_without_classifier_json_is_not_a_saved_classifier(tmp_path):
    assert "no classifier.json, so not a saved classifier" in refusal(tmp_path)


def test_an_incomplete_folder_names_each_missing_part(tmp_path):
    (tmp_path / "classifier.json").write_text("{}")
    (tmp_path / "tokenizer").mkdir()
    message = refusal(tmp_path)
    assert "incomplete model folder, missing encoder, head.safetensors" in message
    assert "tokenizer" not in message.split("missing")[1]
    (tmp_path / "adapter").mkdir()  # a LoRA model keeps its adapter where the encoder would be
    assert "missing adapter, head.safetensors" not in refusal(tmp_path)
    assert "missing head.safetensors" in refusal(tmp_path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "cannot read classifier.json"),
        ("[1, 2]", "classifier.json is not an object"),
        ('{"format": 1}', "not a valid classifier.json"),
    ],
)
def test_an_unreadable_classifier_json_is_one_line(tmp_path, text, problem):
    for part in ("encoder", "tokenizer"):
        (tmp_path / part).mkdir()
    (tmp_path / "head.safetensors").write_bytes(b"")
    (tmp_path / "classifier.json").write_text(text)
    assert problem in refusal(tmp_path)
