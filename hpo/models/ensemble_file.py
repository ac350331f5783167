"""An ensemble model folder: saved classifiers whose probabilities are averaged.

    <folder>/ensemble.json       format, the members' folders, the ensemble's inference block
    <folder>/members/<name>/     one saved classifier each (classifier.json, weights, tokenizer)

Each member reads text its own way (its tokenizer, max_length, long_text); what they must
share is what makes their probabilities the same quantity: the task, formulation, labels,
criterion texts and training data. The ensemble's own ``inference`` block holds its decision
thresholds, chosen on its averaged validation probabilities as a single model's are.

Like classifier.json, ensemble.json is sealed: its ``integrity.digest`` covers the file and each
member's (sealed) classifier.json, so a moved threshold or a member swapped for another model is
refused. Members are distinct folders of their own inside the ensemble: a member listed twice,
or two holding one model, would be an ensemble of one; a link could lead anywhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpo.models.classifier_file import (
    FILE_NAME,
    HEAD,
    INTEGRITY,
    ModelFolderChanged,
    file_digest,
    read_inference,
)
from hpo.models.inference import InferenceSettings, InvalidClassifierFile
from hpo.outputs import atomic_text

ENSEMBLE_FILE = "ensemble.json"
MEMBERS = "members"
SHARED = ("formulation", "labels", "descriptions", "data_fingerprint")  # members must agree


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class _EnsembleSeal(_Strict):
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")  # over the file and its members' files


class _EnsembleJson(_Strict):
    format: Literal["hpo-ensemble"]
    version: Literal[1]
    members: list[str] = Field(min_length=2)  # folder names under members/
    inference: dict[str, Any]
    integrity: _EnsembleSeal


def is_ensemble(folder: str | Path) -> bool:
    return (Path(folder) / ENSEMBLE_FILE).is_file()


def write_ensemble(
    folder: str | Path,
    members: Mapping[str, Path],
    thresholds: Mapping[str, float],
    tuned: Mapping[str, float] | None,
) -> InferenceSettings:
    """Copy ``members`` (name -> saved classifier folder) under ``folder/members/`` (one already
    there, as finalize moves them, stays) and write ensemble.json deciding at ``thresholds``
    (``tuned``: the validation-tuned ones, recorded); returns the ensemble's inference
    settings. A member's folder must not exist yet unless it is the member itself."""
    folder = Path(folder)
    _check_distinct(list(members), [Path(path) for path in members.values()])
    settings = check_members([Path(path) for path in members.values()])[0]
    settings = dataclasses.replace(
        settings, thresholds=dict(thresholds), validation_thresholds=tuned
    )
    for name, path in members.items():
        if Path(path).resolve() != (folder / MEMBERS / name).resolve():
            shutil.copytree(path, folder / MEMBERS / name)
    body = {
        "format": "hpo-ensemble",
        "version": 1,
        "members": list(members),
        "inference": settings.to_json(),
    }
    body[INTEGRITY] = {"digest": _digest(body, folder)}
    with atomic_text(folder / ENSEMBLE_FILE) as stream:
        stream.write(json.dumps(body, indent=2) + "\n")
    return settings


def read_ensemble(folder: str | Path) -> tuple[list[Path], InferenceSettings]:
    """The members' folders and the ensemble's inference settings, checked: every member a
    saved classifier inside ``folder``, all of them agreeing on what they predict."""
    folder = Path(folder)
    try:
        raw = json.loads((folder / ENSEMBLE_FILE).read_text())
        body = _EnsembleJson.model_validate(raw)
    except ValueError as exc:  # ValidationError is one; so is a JSON syntax error
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        where = (".".join(map(str, first["loc"])) if first else "") or "top level"
        raise InvalidClassifierFile(where, first["msg"].lower() if first else str(exc)) from None
    paths = []
    for name in body.members:
        path = folder / MEMBERS / name
        if Path(name).name != name or name in ("", ".", ".."):
            raise InvalidClassifierFile("members", f"{name!r} is not a folder name")
        if path.resolve() != folder.resolve() / MEMBERS / name:
            raise InvalidClassifierFile(
                "members",
                f"{MEMBERS}/{name} is a link (to {path.resolve()}); each member must be a folder "
                "of its own inside the ensemble: copy the model there instead of linking it",
            )
        if not (path / FILE_NAME).is_file():
            raise InvalidClassifierFile("members", f"{MEMBERS}/{name} holds no {FILE_NAME}")
        paths.append(path)
    _check_distinct(body.members, paths)
    settings = InferenceSettings.from_json(body.inference)
    check_members(paths, settings)
    _check_seal(folder, raw)
    return paths, settings


def _check_distinct(names: list[str], paths: list[Path]) -> None:
    """No member twice, by name or by model: that would be an ensemble of fewer models than it
    says (of one: the model alone, behind the refusal of one-member ensembles). Two trainings
    never give the same head, so equal head files mean one model."""
    if repeated := sorted({name for name in names if names.count(name) > 1}):
        raise InvalidClassifierFile(
            "members", f"{repeated[0]} is listed twice; an ensemble's members must differ"
        )
    heads: dict[str, str] = {}
    for name, path in zip(names, paths, strict=True):
        if (path / HEAD).is_file():
            if (same := heads.setdefault(file_digest(path / HEAD), name)) != name:
                raise InvalidClassifierFile(
                    "members",
                    f"{same} and {name} are the same model (identical weights); an ensemble's "
                    "members must be different trainings",
                )


def _digest(body: dict, folder: Path) -> str:
    """sha256 over ensemble.json (its seal aside) and each member's sealed classifier.json."""
    members = [file_digest(folder / MEMBERS / name / FILE_NAME) for name in body["members"]]
    rest = {key: value for key, value in body.items() if key != INTEGRITY}
    text = json.dumps([rest, members], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _check_seal(folder: Path, raw: dict) -> None:
    where = folder / ENSEMBLE_FILE
    if _digest(raw, folder) != raw[INTEGRITY]["digest"]:
        raise ModelFolderChanged(
            f"{where} (or a member's classifier.json) was edited after hpo wrote it: the "
            "ensemble's settings no longer match its members; restore the original folder, or "
            "finalize again"
        )


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


__all__ = ["ENSEMBLE_FILE", "MEMBERS", "is_ensemble", "read_ensemble", "write_ensemble"]
