"""A record that a preflight passed, named by a digest of everything it read: the spec, the
data files, the encoders' files, the packages and the GPUs this machine shows. ``hpo tune``
run again on the same inputs (a resumed study, a study re-run after a crash) finds it and skips
the checks that import torch, transformers and scikit-learn and tokenize with every encoder,
which otherwise compete with its starting workers for the cores. Any change in what the
checks read gives another digest, so the full checks run again: files are known by their
content (those over 64 MiB, most weight files, by size and mtime)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
from importlib import metadata
from pathlib import Path

from hpo.spec import StudySpec

FOLDER = "preflight"  # in the study's train.cache_dir
PACKAGES = ("hpo", "torch", "transformers", "tokenizers", "optuna")
# what the skipped checks never read: the study's name and budget, and its storage (checked on
# every run; its URL may hold a password)
NOT_READ = {"name", "storage", "n_trials", "timeout"}
HPO = Path(__file__).resolve().parents[1]  # the hpo package's own code
GPU_NODES = ("nvidia", "kfd", "dxg")  # a GPU driver's device nodes: NVIDIA, AMD, WSL
CONTENT_BYTES = 64 << 20  # files up to this size are known by content, larger ones by mtime


def receipt_path(spec: StudySpec, configs: list) -> Path | None:
    """Where the receipt of this preflight lies, passed or not; None where its inputs cannot
    be told apart cheaply (an encoder from the hub, whose cache may change; no cache_dir)."""
    first = configs[0]
    if not first.cache_dir:
        return None
    paths = [Path(str(spec.model_paths.get(name, name))) for name in spec.encoders]
    if not all(path.is_dir() for path in paths):
        return None
    digest = hashlib.sha256(json.dumps(inputs(spec, configs, paths), sort_keys=True).encode())
    return Path(first.cache_dir) / FOLDER / f"{digest.hexdigest()[:32]}.passed"


def inputs(spec: StudySpec, configs: list, encoders: list[Path]) -> dict:
    """What the checks a receipt stands for read, as the receipt's digest covers it."""
    descriptions = {config.descriptions_path for config in configs} - {None}
    return {
        "cwd": os.getcwd(),  # relative paths in the spec resolve from here
        "spec": spec.model_dump(mode="json", exclude=NOT_READ),
        "files": [
            _files(Path(spec.data_dir)),
            *map(_files, encoders),
            *(_files(Path(path)) for path in sorted(descriptions)),
        ],
        "packages": {name: _version(name) for name in PACKAGES},
        "code": _files(HPO, "*.py"),  # a checkout or editable install changes without a version
        "gpus": [
            socket.gethostname(),
            os.environ.get("CUDA_VISIBLE_DEVICES"),
            sorted(name for name in os.listdir("/dev") if name.startswith(GPU_NODES))
            if os.path.isdir("/dev")
            else None,
        ],
    }


def write_receipt(path: Path | None) -> None:
    """Record a passed preflight; a cache that cannot be written only costs the next run time."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        pass


def _files(root: Path, pattern: str = "*") -> list:
    """Each file under ``root`` (or ``root`` itself) matching ``pattern``, with its size and
    ``_identity``."""
    root = root.resolve()
    if root.is_file():
        found = [root]
    elif root.is_dir():
        found = sorted(path for path in root.rglob(pattern) if path.is_file())
    else:
        return [str(root), None]
    return [str(root)] + [
        [str(path.relative_to(root)) if path != root else "", stat.st_size, _identity(path, stat)]
        for path in found
        for stat in [path.stat()]
    ]


def _identity(path: Path, stat: os.stat_result) -> str | int:
    """A small file's sha256: a same-size edit with its mtime set back (one label renamed in the
    annotations) must redo the checks, and the data, specs, tokenizers and configs hash in
    milliseconds. A weight file's modification time: hashing it would cost the seconds the
    receipt saves, and the checks read no weight."""
    if stat.st_size > CONTENT_BYTES:
        return stat.st_mtime_ns
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
