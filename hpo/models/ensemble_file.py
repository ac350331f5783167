"""An ensemble model folder: saved classifiers whose probabilities are averaged.

    <folder>/ensemble.json       format, the members' folders, the ensemble's inference block
    <folder>/members/<name>/     one saved classifier each (classifier.json, weights, tokenizer)

Each member reads text its own way (its tokenizer, max_length, long_text); what they must
share is what makes their probabilities the same quantity: the task, formulation, labels,
criterion texts and training data. The ensemble's own ``inference`` block holds its decision
thresholds, chosen on its averaged validation probabilities as a single model's are.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpo.models.classifier_file import FILE_NAME, read_inference
from hpo.models.inference import InferenceSettings, InvalidClassifierFile

ENSEMBLE_FILE = "ensemble.json"
MEMBERS = "members"
SHARED = ("formulation", "labels", "descriptions", "data_fingerprint")  # members must agree


class _EnsembleJson(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    format: Literal["hpo-ensemble"]
    version: Literal[1]
    members: list[str] = Field(min_length=2)  # folder names under members/
    inference: dict[str, Any]


def is_ensemble(folder: str | Path) -> bool:
    return (Path(folder) / ENSEMBLE_FILE).is_file()


def write_ensemble(
    folder: str | Path,
    members: Mapping[str, Path],
    thresholds: Mapping[str, float],
    tuned: Mapping[str, float] | None,
) -> InferenceSettings:
    """Copy ``members`` (name -> saved classifier folder) under ``folder/members/`` and write
    ensemble.json deciding at ``thresholds`` (``tuned``: the validation-tuned ones, recorded).
    ``folder`` must not exist yet; returns the ensemble's inference settings."""
    folder = Path(folder)
    settings = check_members([Path(path) for path in members.values()])[0]
    settings = dataclasses.replace(
        settings, thresholds=dict(thresholds), validation_thresholds=tuned
    )
    for name, path in members.items():
        shutil.copytree(path, folder / MEMBERS / name)
    body = _EnsembleJson(
        format="hpo-ensemble", version=1, members=list(members), inference=settings.to_json()
    )
    (folder / ENSEMBLE_FILE).write_text(json.dumps(body.model_dump(), indent=2) + "\n")
    return settings


def read_ensemble(folder: str | Path) -> tuple[list[Path], InferenceSettings]:
    """The members' folders and the ensemble's inference settings, checked: every member a
    saved classifier inside ``folder``, all of them agreeing on what they predict."""
    folder = Path(folder)
    try:
        body = _EnsembleJson.model_validate(json.loads((folder / ENSEMBLE_FILE).read_text()))
    except ValueError as exc:  # ValidationError is one; so is a JSON syntax error
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        where = (".".join(map(str, first["loc"])) if first else "") or "top level"
        raise InvalidClassifierFile(where, first["msg"].lower() if first else str(exc)) from None
    paths = []
    for name in body.members:
        path = folder / MEMBERS / name
        if Path(name).name != name or name in ("", ".", ".."):
            raise InvalidClassifierFile("members", f"{name!r} is not a folder name")
        if not (path / FILE_NAME).is_file():
            raise InvalidClassifierFile("members", f"{MEMBERS}/{name} holds no {FILE_NAME}")
        paths.append(path)
    settings = InferenceSettings.from_json(body.inference)
    check_members(paths, settings)
    return paths, settings


def check_members(
    paths: list[Path], ensemble: InferenceSettings | None = None
) -> list[InferenceSettings]:
    """The members' settings, once they (and the ensemble's block) agree on ``SHARED``."""
    settings = [read_inference(path) for path in paths]
    reference = ensemble or settings[0]
    for path, member in zip(paths, settings, strict=True):
        for field in SHARED:
            if getattr(member, field) != getattr(reference, field):
                raise InvalidClassifierFile(
                    "members",
                    f"{path.name}'s {field} differs from the ensemble's: members must predict "
                    "the same thing from the same data",
                )
    return settings


__all__ = ["ENSEMBLE_FILE", "is_ensemble", "read_ensemble", "write_ensemble"]
