"""The inference settings, classifier.json's ``inference`` block: written and read back as one
value, checked the same way both times, files written by earlier versions still read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from hpo.data import SYMPTOMS
from hpo.models.inference import InferenceSettings, InvalidClassifierFile
from tests.support.inference_settings import HALF, settings


def test_written_and_read_back_it_is_the_same_value():
    saved = settings()
    block = json.loads(json.dumps(saved.to_json()))
    assert block["task"] == "criteria" and block["labels"] == list(SYMPTOMS)
    assert InferenceSettings.from_json(block) == saved
    with pytest.raises(dataclasses.FrozenInstanceError):
        saved.max_length = 64


def test_a_block_as_hpo_wrote_it_before_pydantic_reads_back_unchanged():
    # the hand-written to_json's output, key for key: what sealed model folders already hold
    written = {
        "task": "criteria",
        "formulation": "multilabel",
        "labels": list(SYMPTOMS),
        "max_length": 256,
        "long_text": "head_tail",
        "descriptions": None,
        "thresholds": {**HALF, SYMPTOMS[0]: 0.35},
        "validation_thresholds": {**HALF, SYMPTOMS[0]: 1},
        "data_fingerprint": "0f" * 32,
    }
    loaded = InferenceSettings.from_json(json.loads(json.dumps(written)))
    assert loaded.thresholds[SYMPTOMS[0]] == 0.35 and loaded.labels == tuple(SYMPTOMS)
    assert loaded.to_json() == written, "written back as it was read"


def test_a_file_saved_before_descriptions_fingerprints_and_validation_thresholds_still_loads():
    old = {
        "formulation": "multilabel",
        "labels": list(SYMPTOMS),
        "max_length": 64,
        "long_text": "truncate",
        "thresholds": HALF,
    }
    loaded = InferenceSettings.from_json(old)
    assert (loaded.descriptions, loaded.data_fingerprint, loaded.validation_thresholds) == (
        None,
        None,
        None,
    )
    assert loaded.task == "criteria"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"formulation": "triples"}, "inference.formulation"),
        ({"labels": ()}, "inference.labels"),
        ({"labels": ("A", "A")}, "inference.labels"),
        ({"max_length": 0}, "inference.max_length"),
        ({"max_length": "128"}, "inference.max_length"),
        ({"max_length": True}, "inference.max_length"),
        ({"long_text": "squash"}, "inference.long_text"),
        ({"thresholds": {**HALF, SYMPTOMS[0]: 7}}, f"inference.thresholds.{SYMPTOMS[0]}"),
        (
            {"thresholds": {k: v for k, v in HALF.items() if k != SYMPTOMS[0]}},
            "inference.thresholds",
        ),
        (
            {"validation_thresholds": {**HALF, SYMPTOMS[1]: -0.5}},
            f"inference.validation_thresholds.{SYMPTOMS[1]}",
        ),
        ({"descriptions": {SYMPTOMS[0]: "only one"}}, "inference.descriptions"),
        ({"data_fingerprint": "not hex"}, "inference.data_fingerprint"),
    ],
)
def test_built_by_the_writer_or_read_from_a_file_it_is_checked_once_the_same_way(change, field):
    with pytest.raises(InvalidClassifierFile) as built:
        settings(**change)
    assert built.value.field == field
    block = {
        **settings().to_json(),
        **{k: list(v) if isinstance(v, tuple) else v for k, v in change.items()},
    }
    with pytest.raises(InvalidClassifierFile) as read:
        InferenceSettings.from_json(block)
    assert read.value.field == field


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({}, "inference.formulation"),
        ({**settings().to_json(), "max_lenght": 64}, "inference.max_lenght"),
        ({**settings().to_json(), "task": "evidence"}, "inference.task"),
        ([], "inference"),
    ],
)
def test_a_broken_block_names_its_first_wrong_field(block, field):
    with pytest.raises(InvalidClassifierFile) as error:
        InferenceSettings.from_json(block)
    assert error.value.field == field
