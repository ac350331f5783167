"""``classifier.json``, the settings saved beside a classifier's weights, read as one checked file.

``save_classifier`` writes it; ``read_classifier_file`` checks it as a whole before any weight
is loaded: the envelope here (format, task, head), the ``inference`` block as
``InferenceSettings``, and what no single part shows: the parts must describe the same
model. An evidence model relabelled ``criteria`` would write a malformed CSV, and a head cut
to 3 labels would end in a long traceback.

What no schema shows is an edit that stays valid: two labels swapped, another ``long_text``, a
threshold moved, or the file copied onto another model's weights would all change predictions
silently. So ``write_classifier_file`` seals the file: its ``integrity`` block records a digest
of each weight file and one digest over the settings and those, and ``check_integrity`` refuses
a folder where either no longer matches, or that holds no seal.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpo.errors import UsageError
from hpo.models.inference import InferenceSettings, InvalidClassifierFile
from hpo.models.settings import HeadConfig
from hpo.outputs import atomic_text
from hpo.validation import located
from hpo.vocabulary import FORMULATIONS, TRAITS, Task, task_of

FILE_NAME = "classifier.json"
INTEGRITY = "integrity"  # the seal's key in classifier.json
SCHEME = "sha256-sampled-1"  # how file digests are taken (below); a new way gets a new name
HEAD = "head.safetensors"
SEALED_FOLDERS = ("encoder", "adapter", "tokenizer")  # hpo writes them whole: every file counts
NOT_SEALED = ("README.md",)  # peft writes one into adapter/; prose, and a user may edit it
# A weight file's digest: the whole file up to FULL_HASH_BYTES; above it, its size, its
# safetensors header (every tensor's name, dtype, shape and offset) and SAMPLES slices of
# SAMPLE_BYTES spread over it. Why not all of it: the seal is there to tie the settings to the
# weights they were saved with (a hand edit, a classifier.json copied onto other weights, a
# member swapped), not to prove weights unforged (anyone can recompute a sha256); two trainings
# differ in every tensor, so 16 MiB spread over the file tell any two apart, where hashing a
# 740 MB encoder whole would add seconds to every load (4.6 s against 0.14 s, measured on a
# shared 2-core machine) to catch only bit rot in place.
FULL_HASH_BYTES = 16 << 20
SAMPLES, SAMPLE_BYTES = 16, 1 << 20
MAX_HEADER_BYTES = 100 << 20  # safetensors' own limit on a header
_HEX64 = r"^[0-9a-f]{64}$"


class ModelFolderChanged(UsageError):
    """A saved classifier whose classifier.json no longer matches the weights saved with it."""


class _Strict(BaseModel):
    # strict: "1" is not a format and true is not a label count; unknown keys are typos
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Seal(_Strict):
    """classifier.json's ``integrity`` block."""

    scheme: Literal["sha256-sampled-1"]
    files: dict[str, Annotated[str, Field(pattern=_HEX64)]]  # path in the folder -> digest
    digest: str = Field(pattern=_HEX64)  # over the rest of the file and ``files``


class _Envelope(_Strict):
    format: Literal[1]
    task: Task
    head: HeadConfig
    inference: dict[str, Any]  # read by InferenceSettings.from_json
    # a LoRA model's base encoder; the folder holds only the adapter
    base_encoder: str | None = None
    # its weight files' digests, where it was a local folder (hpo 0.1 before stop 68: none)
    base_encoder_files: dict[str, Annotated[str, Field(pattern=_HEX64)]] | None = None
    integrity: Seal


@dataclass(frozen=True)
class ClassifierFile:
    task: Task
    head: HeadConfig
    inference: InferenceSettings
    base_encoder: str | None
    integrity: Seal


def read_classifier_file(meta: dict) -> ClassifierFile:
    """``meta`` (classifier.json, parsed) checked as a whole; raises ``InvalidClassifierFile``."""
    try:
        envelope = _Envelope.model_validate(meta)
    except ValidationError as exc:
        field, problem = located(exc.errors()[0])
        raise InvalidClassifierFile(field or "top level", problem) from None
    saved = ClassifierFile(
        envelope.task,
        envelope.head,
        InferenceSettings.from_json(envelope.inference),
        envelope.base_encoder,
        envelope.integrity,
    )
    _check_consistent(saved)
    return saved


def read_checked(folder: str | Path, weights: bool = False) -> ClassifierFile:
    """classifier.json in ``folder``, checked as a whole and against its seal (``weights``:
    and the weight files against theirs; loading them checks that)."""
    meta = json.loads((Path(folder) / FILE_NAME).read_text(encoding="utf-8"))
    saved = read_classifier_file(meta)
    check_integrity(folder, meta, weights)
    return saved


def read_inference(folder: str | Path) -> InferenceSettings:
    """The checked inference block of the classifier saved in ``folder``."""
    return read_checked(folder).inference


def write_classifier_file(folder: str | Path, meta: dict) -> None:
    """``meta`` as ``folder``'s classifier.json, sealed to the weights already written there."""
    folder = Path(folder)
    meta = {key: value for key, value in meta.items() if key != INTEGRITY}
    files = {name: file_digest(folder / name) for name in _sealed_files(folder)}
    meta[INTEGRITY] = {"scheme": SCHEME, "files": files, "digest": _digest(meta, files)}
    with atomic_text(folder / FILE_NAME) as stream:
        stream.write(json.dumps(meta, indent=2) + "\n")


def rewrite_inference(folder: str | Path, inference: InferenceSettings) -> None:
    """Replace the inference block of the classifier in ``folder`` (finalize's refit takes its
    thresholds from the train-only run) and seal it again; the file must match before."""
    meta = json.loads((Path(folder) / FILE_NAME).read_text(encoding="utf-8"))
    check_integrity(folder, meta, weights=True)
    write_classifier_file(folder, {**meta, "inference": inference.to_json()})


def check_integrity(folder: str | Path, meta: dict, weights: bool = True) -> None:
    """Raise ``ModelFolderChanged`` unless ``meta`` (``folder``'s classifier.json, parsed) and,
    with ``weights``, the weight files it sealed are as hpo saved them. Without ``weights`` no
    weight is read: the settings are checked against the digests recorded beside them, which
    is all an edit of classifier.json can break. hpo seals every model it saves, so a file
    without a seal had it removed and is refused (``InvalidClassifierFile``)."""
    folder = Path(folder)
    where = folder / FILE_NAME
    if INTEGRITY not in meta:
        raise InvalidClassifierFile(INTEGRITY, "is required")
    try:
        seal = Seal.model_validate(meta[INTEGRITY])
    except ValidationError:
        raise InvalidClassifierFile(INTEGRITY, "is not a seal hpo wrote") from None
    fix = "restore the original model folder, or re-save the model with hpo retrain / hpo finalize"
    _check_complete(folder, seal, fix)
    for name, digest in seal.files.items() if weights else ():
        path = folder / name
        if file_digest(path) != digest:
            raise ModelFolderChanged(
                f"{path} is not the file saved with {where} (changed since hpo saved the model); "
                f"{fix}"
            )
    if _digest(meta, seal.files) != seal.digest:
        raise ModelFolderChanged(
            f"{where} was edited after hpo saved it: its settings no longer match the weights "
            "they were saved with (labels, long_text, thresholds, ... change predictions); "
            "restore the original classifier.json, or re-save the model with hpo retrain / "
            "hpo finalize"
        )


BASE_WEIGHTS = ("*.safetensors", "*.bin")  # what a base encoder's folder holds of its weights


def base_encoder_files(base: str | Path) -> dict[str, str] | None:
    """The digests of a LoRA model's base encoder's weight files, where it is a local folder
    (a hub id's cache is the hub's to keep); recorded beside the adapter that was trained on
    them."""
    folder = Path(base)
    if not folder.is_dir():
        return None
    return {
        path.name: file_digest(path)
        for pattern in BASE_WEIGHTS
        for path in sorted(folder.glob(pattern))
    }


def check_base_encoder(folder: str | Path, meta: dict) -> None:
    """Raise ``ModelFolderChanged`` unless the base encoder a LoRA model names holds the
    weights its adapter was trained on: another checkpoint at that path changed every
    prediction without a word."""
    recorded, base = meta.get("base_encoder_files"), meta.get("base_encoder")
    if recorded is None or base is None:
        return
    now = base_encoder_files(base) or {}
    if changed := sorted(name for name in {*recorded, *now} if recorded.get(name) != now.get(name)):
        raise ModelFolderChanged(
            f"{base}: the base encoder of {folder} is not the one its adapter was trained on "
            f"({', '.join(changed)} changed since hpo saved the model); restore it as it was, "
            "or re-save the model with hpo retrain / hpo finalize"
        )


def _check_complete(folder: Path, seal: Seal, fix: str) -> None:
    """The seal lists exactly the files the loader would read: every file under ``encoder/``,
    ``adapter/`` and ``tokenizer/`` and ``head.safetensors``, each still there. A file added
    after saving (a ``special_tokens_map.json`` that changes how every post is tokenized) or an
    entry dropped from the list (then the file it named could be anything) is refused, so no
    edit short of re-sealing the folder from scratch reaches the loader. Names only: no file is
    read, so it runs on every check, the settings-only one too."""
    where = folder / FILE_NAME
    present = set(_sealed_files(folder))
    if added := sorted(present - seal.files.keys()):
        raise ModelFolderChanged(
            f"{folder / added[0]} is not among the files saved with {where} (added after hpo "
            f"saved the model, or its entry removed from the seal) and would change what the "
            f"model loads; remove it, or {fix}"
        )
    for name in sorted(seal.files.keys() - present):
        inside = not Path(name).is_absolute() and ".." not in Path(name).parts
        if inside and not (folder / name).exists():
            raise ModelFolderChanged(f"{folder / name}, saved with {where}, is missing; {fix}")
        raise InvalidClassifierFile(INTEGRITY, f"files names {name!r}, not a file hpo seals")


def file_digest(path: Path) -> str:
    """sha256 of ``path`` as the comment on FULL_HASH_BYTES says: whole when small, sampled
    (header included) when large."""
    size = path.stat().st_size
    digest = hashlib.sha256(f"{size}:".encode())
    with path.open("rb") as stream:
        if size <= FULL_HASH_BYTES:
            return hashlib.file_digest(stream, lambda: digest).hexdigest()
        if path.suffix == ".safetensors":
            header = 8 + int.from_bytes(stream.read(8), "little")
            stream.seek(0)
            digest.update(stream.read(min(header, size, MAX_HEADER_BYTES)))
        for i in range(SAMPLES):
            stream.seek(i * (size - SAMPLE_BYTES) // (SAMPLES - 1))
            digest.update(stream.read(SAMPLE_BYTES))
    return digest.hexdigest()


def _sealed_files(folder: Path) -> list[str]:
    found = [HEAD] if (folder / HEAD).is_file() else []
    for sub in SEALED_FOLDERS:
        found += sorted(
            path.relative_to(folder).as_posix()
            for path in (folder / sub).rglob("*")
            if path.is_file() and path.name not in NOT_SEALED
        )
    return found


def _digest(meta: dict, files: dict[str, str]) -> str:
    """One sha256 over every setting in ``meta`` (its seal aside) and the files' digests, in
    canonical JSON: a float reads back as written, so a re-read file gives the same text."""
    body = {key: value for key, value in meta.items() if key != INTEGRITY}
    text = json.dumps([body, files], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _check_consistent(saved: ClassifierFile) -> None:
    """What no single part shows: the parts must describe the same model."""
    block = saved.inference
    if block.formulation not in FORMULATIONS[saved.task]:
        raise InvalidClassifierFile(
            "task",
            f"{saved.task!r} does not fit inference.formulation "
            f"{block.formulation!r} (a {task_of(block.formulation)} model)",
        )
    # pairs and evidence: one logit
    traits = TRAITS[block.formulation]
    outputs = len(block.labels) if traits.per_post else 1
    if saved.head.num_labels != outputs:
        raise InvalidClassifierFile(
            "head.num_labels",
            f"{saved.head.num_labels}, but a {block.formulation} model "
            f"with {len(block.labels)} labels has {outputs} output(s)",
        )
    if traits.scores_sentences != (saved.head.post_pooling is not None):
        raise InvalidClassifierFile(
            "head.post_pooling",
            f"{saved.head.post_pooling}, but a whole_post model pools its sentences and no "
            "other model does",
        )


__all__ = [
    "FILE_NAME",
    "ClassifierFile",
    "InvalidClassifierFile",
    "ModelFolderChanged",
    "check_integrity",
    "file_digest",
    "read_checked",
    "read_classifier_file",
    "read_inference",
    "rewrite_inference",
    "write_classifier_file",
]
