"""The classifier.json schema names the same choices as the code that writes the file."""

from __future__ import annotations

from typing import get_args

from hpo.data.tokenize import LONG_TEXT
from hpo.models.settings import ACTIVATIONS, HeadConfig
from hpo.train.classifier_file import FORMULATIONS, HeadFile, InferenceFile


def test_the_schema_offers_every_choice_training_can_save():
    assert set(get_args(InferenceFile.model_fields["long_text"].annotation)) == set(LONG_TEXT)
    assert set(get_args(HeadFile.model_fields["activation"].annotation)) == set(ACTIVATIONS)
    assert set(HeadFile.model_fields) == set(HeadConfig.__dataclass_fields__)
    formulations = {f for fs in FORMULATIONS.values() for f in fs}
    assert set(get_args(InferenceFile.model_fields["formulation"].annotation)) == formulations
