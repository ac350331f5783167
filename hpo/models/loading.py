"""Meta-safe loading of encoders and tokenizers for the installed transformers (>= 5).

transformers 5 builds every model on the meta device and patches process-global state
while doing so (``PreTrainedModel.tie_weights`` becomes a no-op, the default dtype
changes). Two threads building models at once corrupt each other, so every model
construction in this package runs under one process-wide lock, and every load ends with
a scan for tensors left on meta.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PreTrainedModel
from transformers.models.auto.modeling_auto import MODEL_MAPPING
from transformers.utils import logging as hf_logging

from hpo.errors import IncompleteCheckpoint, MetaTensorError

log = logging.getLogger(__name__)
# What belongs in a trial's train.log but not on the terminal: trial logs attach to it, nothing
# else does (hpo.outputs.TrialOutputs.trial_log).
DETAIL = logging.getLogger("hpo.detail")
DETAIL.propagate = False
DETAIL.setLevel(logging.INFO)


class _LoadReportToDetail(logging.Filter):
    """transformers logs a ~12-line "LOAD REPORT" per load as a warning (an unused pooler
    counts as UNEXPECTED): it goes to the trial's log only; a missing weight still gets one
    line on the terminal, from ``load_pretrained``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "LOAD REPORT" not in record.getMessage():
            return True
        DETAIL.info("%s", record.getMessage())
        return False


logging.getLogger("transformers.modeling_utils").addFilter(_LoadReportToDetail())

MODEL_LOCK = threading.RLock()
_REAL_TIE_WEIGHTS = PreTrainedModel.tie_weights


@contextmanager
def model_construction() -> Iterator[None]:
    """Hold while building any model (from_pretrained, from_config, a head).

    Also puts back the process-global state that loading patches, in case code outside
    this lock (another library) left it changed.
    """
    with MODEL_LOCK:
        default_dtype = torch.get_default_dtype()
        try:
            yield
        finally:
            torch.set_default_dtype(default_dtype)
            if PreTrainedModel.tie_weights is not _REAL_TIE_WEIGHTS:
                log.warning("PreTrainedModel.tie_weights was left patched by a load; restoring it")
                PreTrainedModel.tie_weights = _REAL_TIE_WEIGHTS


def hide_progress_bars() -> None:
    """Silence transformers' own bars ("Loading weights", "Writing model shards") in this
    process: what --no-progress asks of every bar, not only hpo's."""
    hf_logging.disable_progress_bar()


def find_meta_tensors(model: nn.Module) -> list[str]:
    """Names of every parameter (tied duplicates included) and buffer on the meta device."""
    names = [n for n, p in model.named_parameters(remove_duplicate=False) if p.is_meta]
    names += [n for n, b in model.named_buffers(remove_duplicate=False) if b.is_meta]
    return names


def assert_no_meta(model: nn.Module, context: str = "") -> None:
    if names := find_meta_tensors(model):
        raise MetaTensorError(names, context)


def encoder_init_kwargs(config) -> dict:
    """Skip the pooler where the class has one: our heads pool themselves, and MLM
    checkpoints carry no pooler weights, so it would be randomly initialised."""
    model_class = MODEL_MAPPING.get(type(config), None)
    if model_class and "add_pooling_layer" in inspect.signature(model_class.__init__).parameters:
        return {"add_pooling_layer": False}
    return {}


def load_pretrained(
    name_or_path: str | Path,
    model_class=AutoModel,
    config_overrides: dict | None = None,
    **kwargs,
) -> PreTrainedModel:
    """``model_class.from_pretrained`` made safe: float32, no device_map, under the lock,
    in train mode, and verified free of meta tensors."""
    config = AutoConfig.from_pretrained(name_or_path, **(config_overrides or {}))
    if model_class is AutoModel:
        kwargs = {**encoder_init_kwargs(config), **kwargs}
    with model_construction():
        model, info = model_class.from_pretrained(
            name_or_path,
            config=config,
            dtype=torch.float32,
            output_loading_info=True,
            ignore_mismatched_sizes=True,  # reported below by name, not in a bare RuntimeError
            **kwargs,
        )
    if mismatched := info.get("mismatched_keys"):
        shown = ", ".join(
            f"{key} {tuple(saved)} where the model has {tuple(built)}"
            for key, saved, built in list(mismatched)[:3]
        )
        raise IncompleteCheckpoint(
            f"{name_or_path}: {len(mismatched)} weight(s) in its checkpoint do not fit its "
            f"config.json ({shown}); point at the checkpoint that config belongs to"
        )
    if missing := sorted(info.get("missing_keys") or ()):
        # the pooler, the one part a checkpoint may lack, is never built (encoder_init_kwargs)
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise IncompleteCheckpoint(
            f"{name_or_path}: {len(missing)} encoder weight(s) are not in its checkpoint "
            f"({shown}) and would train from random values; point at a complete checkpoint, "
            "saved with save_pretrained (a state_dict's 'module.' prefix is not read)"
        )
    model.train()
    assert_no_meta(model, f"after loading {name_or_path}")
    return model


def check_weights(name: str, path: str | Path) -> None:
    """Encoder ``name``'s weights at ``path`` load whole (no file truncated or missing, no
    weight absent or misshapen), as one line naming the fix: checked before a study exists,
    for a trial would fail on them after it does, or train on random values."""
    try:
        load_pretrained(path)
    except IncompleteCheckpoint as exc:
        raise IncompleteCheckpoint(f"encoder {name!r}: {exc}") from None
    except Exception as exc:  # transformers' and safetensors' own errors, in their words
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IncompleteCheckpoint(
            f"encoder {name!r}: cannot load its weights from {path} ({said}); point "
            f"model_paths.{name} at a complete checkpoint, saved with save_pretrained"
        ) from None
