"""Which criteria model and evidence model may explain posts together.

A pair is the criteria study's ``final/model`` and the evidence study's ``final/model`` (or
any two checkpoints), trained on the same data files and the same criterion texts: the
evidence model was taught to find the sentences for exactly the criteria the criteria model
decides. Both facts are in each ``classifier.json`` (``inference.data_fingerprint`` and
``inference.descriptions``) and are checked before any weight is loaded.
"""

from __future__ import annotations

from pathlib import Path

from hpo.errors import UsageError
from hpo.models.inference import InferenceSettings
from hpo.predict import read_settings

FINGERPRINT_SHOWN = 16  # hex digits of a data fingerprint in messages, as model cards show it
A_MODEL = {"criteria": "a criteria model", "evidence": "an evidence model"}


class MismatchedPair(UsageError):
    """A criteria and an evidence model that were not trained to work together."""


def check_pair(criteria_dir: str | Path, evidence_dir: str | Path) -> str | None:
    """Raise ``MismatchedPair`` unless the two folders hold a criteria and an evidence model
    trained on the same criterion texts and data; return a note when the data could not be
    checked (a model saved before data fingerprints were recorded)."""
    criteria, evidence = read_settings(criteria_dir), read_settings(evidence_dir)
    for flag, folder, settings, task in (
        ("--criteria", criteria_dir, criteria, "criteria"),
        ("--evidence", evidence_dir, evidence, "evidence"),
    ):
        if settings.task != task:
            raise MismatchedPair(
                f"{flag} {folder} is {A_MODEL[settings.task]}; pass the {task} study's "
                f"final/model (or a {task} trial's checkpoint/) there"
            )
    if criteria.labels != evidence.labels or criteria.descriptions != evidence.descriptions:
        differing = [
            label
            for label in criteria.labels
            if criteria.descriptions.get(label) != evidence.descriptions.get(label)
        ] or ["the symptom list"]
        raise MismatchedPair(
            f"{criteria_dir} and {evidence_dir} were trained on different criterion texts "
            f"({', '.join(differing)}); pair the finals of two studies with the same descriptions "
            "file"
        )
    missing = [
        str(folder)
        for folder, settings in ((criteria_dir, criteria), (evidence_dir, evidence))
        if settings.data_fingerprint is None
    ]
    if missing:
        # the texts match, which is what the evidence model's input depends on: go on, and say so
        return (
            "cannot check that the two models were trained on the same data: "
            f"{' and '.join(missing)} "
            f"{'was' if len(missing) == 1 else 'were'} saved before data fingerprints "
            "were recorded (retrain "
            "or re-finalize with this version to have it checked); the criterion texts match"
        )
    if criteria.data_fingerprint != evidence.data_fingerprint:
        raise MismatchedPair(
            f"{criteria_dir} and {evidence_dir} were trained on different data (fingerprints "
            f"{_short(criteria)} and {_short(evidence)}); pair the finals of two studies on the "
            "same data_dir"
        )
    return None


def _short(settings: InferenceSettings) -> str:
    return (settings.data_fingerprint or "")[:FINGERPRINT_SHOWN]
