"""Moving models to a device without ever training on re-initialised weights.

``safe_to_device`` scans every parameter and buffer. Tensors still on the meta device are
restored from the checkpoint they came from, or the call raises ``MetaTensorError``
naming them. It never re-initialises (``to_empty`` + ``reset_parameters``): that would replace
pretrained weights with random ones and let training carry on silently.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn
from transformers import PreTrainedModel

from hpo.errors import MetaTensorError
from hpo.models.loading import find_meta_tensors, model_construction

_MODULE_WRAPPER_NAMES = {
    "DataParallel",
    "DistributedDataParallel",
    "FullyShardedDataParallel",
    "DeepSpeedEngine",
}


def unwrap_model(model: nn.Module) -> nn.Module:
    """The real model under torch.compile, (Distributed)DataParallel, FSDP, DeepSpeed and
    peft wrappers, in any nesting. Assign the result to a local: never overwrite the
    wrapped reference, or the wrapper (and its devices) is lost."""
    while True:
        if isinstance(getattr(model, "_orig_mod", None), nn.Module):
            model = model._orig_mod
        elif type(model).__name__ in _MODULE_WRAPPER_NAMES:
            model = model.module
        elif callable(getattr(model, "get_base_model", None)):
            base = model.get_base_model()
            if base is model:
                return model
            model = base
        else:
            return model


def forward_keys(model: nn.Module) -> frozenset[str] | None:
    """Keyword names the model's ``forward`` accepts, or None when it takes ``**kwargs``.

    None means "accept all": the signature cannot tell which keys are safe to pass.
    """
    parameters = inspect.signature(unwrap_model(model).forward).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters if p.kind in named)


def safe_to_device(model: nn.Module, device, checkpoint: str | Path | None = None) -> nn.Module:
    """Move ``model`` to ``device`` after making sure no tensor is left on meta.

    ``checkpoint``: a directory (or ``.safetensors`` file, or a cached hub name) holding
    the weights the model was loaded from. Only meta tensors are replaced from it.
    Build the optimizer after this call: restored tensors are new Parameter objects.
    """
    real = unwrap_model(model)
    if find_meta_tensors(real):
        if checkpoint is None:
            raise MetaTensorError(
                find_meta_tensors(real), "and no checkpoint was given to restore them from"
            )
        _restore_meta(real, checkpoint)
        if left := find_meta_tensors(real):
            raise MetaTensorError(left, f"after restoring from {checkpoint}")
    return model.to(device)


def _restore_meta(model: nn.Module, checkpoint: str | Path) -> None:
    store = _CheckpointTensors(checkpoint)
    prefixes = {m.base_model_prefix for m in model.modules() if isinstance(m, PreTrainedModel)} - {
        ""
    }
    for names, placeholder, is_buffer in _meta_groups(model):
        value = next(
            (
                t
                for name in names
                for key in _candidate_keys(name, prefixes)
                if (t := store.get(key, placeholder.shape)) is not None
            ),
            None,
        )
        if value is None and is_buffer:
            value = _fresh_buffer(model, names[0])
        if value is None:
            continue  # a tied copy may still come back through tie_weights below
        value = value.to(placeholder.dtype)
        if not is_buffer:
            value = nn.Parameter(value, requires_grad=placeholder.requires_grad)
        for name in names:  # one tensor object under several names stays one (tying kept)
            owner, leaf = _owner(model, name)
            slots = owner._buffers if is_buffer else owner._parameters
            slots[leaf] = value  # direct slot write keeps a buffer's persistent flag
    for module in _outermost_pretrained(model):
        module.tie_weights()


def _outermost_pretrained(model: nn.Module) -> list[PreTrainedModel]:
    """transformers models not nested in another one (their tie_weights covers the inner)."""
    found: list[tuple[str, PreTrainedModel]] = []
    for name, module in model.named_modules():  # pre-order: parents come first
        if isinstance(module, PreTrainedModel) and not any(
            name.startswith(f"{outer}.") or outer == "" for outer, _ in found
        ):
            found.append((name, module))
    return [module for _, module in found]


def _meta_groups(model: nn.Module) -> Iterator[tuple[list[str], torch.Tensor, bool]]:
    """Meta tensors grouped by identity: (all names of the tensor, the tensor, is_buffer)."""
    groups: dict[int, tuple[list[str], torch.Tensor, bool]] = {}
    for is_buffer, items in (
        (False, model.named_parameters(remove_duplicate=False)),
        (True, model.named_buffers(remove_duplicate=False)),
    ):
        for name, tensor in items:
            if tensor.is_meta:
                groups.setdefault(id(tensor), ([], tensor, is_buffer))[0].append(name)
    yield from groups.values()


def _candidate_keys(name: str, prefixes: set[str]) -> Iterator[str]:
    """Checkpoint keys that may hold ``name``: the name itself, then shorter dotted
    suffixes (a wrapper adds leading components), each also under ``base_model_prefix``."""
    # peft's renaming
    peft_free = name.replace("base_model.model.", "").replace(".base_layer.", ".")
    if peft_free != name:
        yield from _candidate_keys(peft_free, prefixes)
    parts = name.split(".")
    for start in range(len(parts) - 1):  # keep at least "module.leaf": a bare leaf is ambiguous
        suffix = ".".join(parts[start:])
        yield suffix
        for prefix in prefixes:
            yield f"{prefix}.{suffix}"
            if suffix.startswith(prefix + "."):
                yield suffix[len(prefix) + 1 :]


def _owner(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    path, _, leaf = name.rpartition(".")
    return (model.get_submodule(path) if path else model), leaf


def _fresh_buffer(model: nn.Module, name: str) -> torch.Tensor | None:
    """Non-persistent buffers (position_ids, token_type_ids) are not in checkpoints: take
    them from a fresh copy of the innermost transformers model that owns them."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, -1, -1):
        path = ".".join(parts[:cut])
        owner = model.get_submodule(path) if path else model
        if isinstance(owner, PreTrainedModel):
            with model_construction():
                fresh = type(owner)(owner.config)
            return fresh.get_buffer(".".join(parts[cut:]))
    return None


class _CheckpointTensors:
    """Lazy, name-addressed access to a checkpoint's safetensors (sharded or not)."""

    def __init__(self, checkpoint: str | Path):
        self.files = _safetensors_files(checkpoint)
        self.key_to_file: dict[str, Path] = {}
        for file in self.files:
            with safe_open(file, framework="pt") as f:
                for key in f.keys():
                    self.key_to_file.setdefault(key, file)

    def get(self, key: str, shape: torch.Size) -> torch.Tensor | None:
        file = self.key_to_file.get(key)
        if file is None:
            return None
        with safe_open(file, framework="pt") as f:
            if tuple(f.get_slice(key).get_shape()) != tuple(shape):
                return None
            return f.get_tensor(key)


def _safetensors_files(checkpoint: str | Path) -> list[Path]:
    path = Path(checkpoint)
    if path.is_file():
        return [path]
    if not path.is_dir():
        path = _hub_cache_dir(str(checkpoint))
    index = path / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [path / shard for shard in shards]
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(
            f"no .safetensors files in {path}; cannot restore meta tensors from it"
        )
    return files


def _hub_cache_dir(name: str) -> Path:
    from huggingface_hub import snapshot_download

    return Path(
        snapshot_download(name, local_files_only=True, allow_patterns=["*.safetensors", "*.json"])
    )
