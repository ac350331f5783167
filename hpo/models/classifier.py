"""Criteria and evidence classifiers: a pretrained encoder plus a small classification head.

Both tasks classify a (criterion description, text) pair; they differ in the text (a
whole post or one sentence) and are kept as two named classes so checkpoints say which
task they were trained for. ``forward`` returns logits only, which DataParallel gathers.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import ClassVar

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from hpo.errors import NonFiniteWeights
from hpo.models.adapters import add_lora, is_lora, load_lora
from hpo.models.classifier_file import (
    FILE_NAME,
    HEAD,
    base_encoder_files,
    check_base_encoder,
    check_integrity,
    write_classifier_file,
)
from hpo.models.device import safe_to_device, unwrap_model
from hpo.models.inference import InferenceSettings
from hpo.models.loading import load_pretrained, model_construction
from hpo.models.settings import ACTIVATIONS, HeadConfig, LoraSettings
from hpo.models.tokenizer import load_tokenizer
from hpo.outputs import share_files
from hpo.vocabulary import Task

_CHECKPOINT_FORMAT = 1


def build_head(input_size: int, config: HeadConfig) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Dropout(config.dropout)]
    width = input_size
    activation = getattr(nn, ACTIVATIONS[config.activation])
    for _ in range(config.hidden_layers):
        layers += [nn.Linear(width, config.hidden_size), activation(), nn.Dropout(config.dropout)]
        width = config.hidden_size
    layers.append(nn.Linear(width, config.outputs))
    return nn.Sequential(*layers)


class EncoderClassifier(nn.Module):
    task: ClassVar[Task]

    def __init__(self, encoder: nn.Module, head_config: HeadConfig):
        super().__init__()
        self.encoder = encoder
        self.head_config = head_config
        with model_construction():
            self.head = build_head(encoder.config.hidden_size, head_config)

    @property
    def config(self):
        return self.encoder.config

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        sentence_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Per sequence its logits (sequences, outputs); with ``sentence_index`` (whole_post:
        per token its sentence in the sequence, -1 for none) per sentence its outputs
        (sequences, tokens, outputs): row i of a sequence scores its sentence i, the rows past
        its last sentence score nothing. Padded to the tokens so every replica of a
        DataParallel model returns one shape."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, **extra
        ).last_hidden_state
        if sentence_index is not None:
            return self.head(sentence_means(hidden, sentence_index))
        return self.head(self.pool(hidden, attention_mask))

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if self.head_config.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def sentence_means(hidden: torch.Tensor, sentence_index: torch.Tensor) -> torch.Tensor:
    """Per sequence and sentence, the mean of its tokens' hidden states: (sequences, tokens,
    hidden), row i for sentence i, zero past the last sentence."""
    inside = (sentence_index >= 0).unsqueeze(-1).to(hidden.dtype)
    index = sentence_index.clamp(min=0).unsqueeze(-1)
    sums = torch.zeros_like(hidden).scatter_add(1, index.expand_as(hidden), hidden * inside)
    counts = torch.zeros_like(inside).scatter_add(1, index, inside)
    return sums / counts.clamp(min=1)


class CriteriaClassifier(EncoderClassifier):
    """(criterion description, post) → does the post show this symptom?"""

    task = "criteria"


class EvidenceClassifier(EncoderClassifier):
    """(criterion description, sentence) → is this sentence evidence for the symptom?"""

    task = "evidence"


CLASSIFIERS: dict[Task, type[EncoderClassifier]] = {
    c.task: c for c in (CriteriaClassifier, EvidenceClassifier)
}


def build_classifier(
    task: Task,
    encoder_path: str | Path,
    head_config: HeadConfig | None = None,
    encoder_dropout: float | None = None,
    lora: LoraSettings | None = None,
    attention_dropout: float | None = None,
) -> EncoderClassifier:
    """A classifier on a meta-safely loaded pretrained encoder, LoRA-adapted if ``lora``.
    ``encoder_dropout`` sets hidden and attention dropout, ``attention_dropout`` the latter
    alone; None keeps the checkpoint's."""
    overrides = {}
    if encoder_dropout is not None:
        overrides = {
            "hidden_dropout_prob": encoder_dropout,
            "attention_probs_dropout_prob": encoder_dropout,
        }
    if attention_dropout is not None:
        overrides["attention_probs_dropout_prob"] = attention_dropout
    encoder = load_pretrained(encoder_path, config_overrides=overrides)
    if lora is not None:
        encoder = add_lora(encoder, lora)
    return CLASSIFIERS[task](encoder, head_config or HeadConfig())


def save_classifier(
    model: nn.Module,
    out_dir: str | Path,
    tokenizer=None,
    inference: InferenceSettings | None = None,
) -> Path:
    """Write the encoder (``encoder/`` via save_pretrained, or only ``adapter/`` for LoRA),
    ``head.safetensors``, ``tokenizer/`` and ``classifier.json`` (with ``inference``: how
    training read text, and its decision thresholds; a model saved without them cannot
    predict); works on a wrapped model without touching the wrapper."""
    real = unwrap_model(model)
    if bad := non_finite_tensors(real):  # before a file is written: nothing half-saved is left
        raise NonFiniteWeights(
            f"refusing to save a classifier whose weights are not finite ({_listed(bad)}): its "
            "training diverged; lower learning_rate and train it again"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": _CHECKPOINT_FORMAT,
        "task": real.task,
        "head": asdict(real.head_config),
        "inference": inference.to_json() if inference is not None else {},
    }
    if is_lora(real.encoder):
        # the adapters only; the base encoder is named
        real.encoder.save_pretrained(out / "adapter")
        meta["base_encoder"] = real.encoder.get_base_model().name_or_path
        if (base_files := base_encoder_files(meta["base_encoder"])) is not None:
            meta["base_encoder_files"] = base_files
    else:
        real.encoder.save_pretrained(out / "encoder")
    if tokenizer is not None:
        tokenizer.save_pretrained(out / "tokenizer")
    save_file(
        {k: v.detach().cpu().contiguous() for k, v in real.head.state_dict().items()},
        out / HEAD,
    )
    share_files(out)
    write_classifier_file(out, meta)  # last: sealed to the weights now on disk
    return out


def load_classifier(path: str | Path) -> tuple[EncoderClassifier, object]:
    """The classifier and tokenizer saved by ``save_classifier``, through the meta-safe loader."""
    path = Path(path)
    meta = json.loads((path / FILE_NAME).read_text())
    check_integrity(path, meta)  # before a weight is read: the settings must be the weights' own
    if "base_encoder" in meta:
        check_base_encoder(path, meta)
        encoder = load_lora(load_pretrained(meta["base_encoder"]), path / "adapter")
    else:
        encoder = load_pretrained(path / "encoder")
    model = CLASSIFIERS[meta["task"]](encoder, HeadConfig(**meta["head"]))
    try:
        model.head.load_state_dict(load_file(path / HEAD), strict=True)
    except (
        RuntimeError
    ) as exc:  # torch lists every mismatch over many lines; the first names the problem
        detail = next(
            (line.strip() for line in str(exc).splitlines() if "mismatch" in line or "key" in line),
            exc,
        )
        raise ValueError(
            f"head.safetensors does not fit the head classifier.json describes: {detail}"
        ) from None
    if bad := non_finite_tensors(model):  # it would predict nan for every text
        raise NonFiniteWeights(
            f"{path}: the saved classifier's weights are not finite ({_listed(bad)}), so it "
            "would predict nan; train it again with a lower learning_rate"
        )
    tokenizer = load_tokenizer(path / "tokenizer") if (path / "tokenizer").is_dir() else None
    return model, tokenizer


def non_finite_tensors(model: nn.Module) -> list[str]:
    """The floating-point parameters and buffers of ``model`` holding NaN or inf, by name;
    one read of the device for all of them. Meta tensors hold no values and are skipped."""
    named = [
        (name, tensor)
        for name, tensor in (*model.named_parameters(), *model.named_buffers())
        if tensor.is_floating_point() and not tensor.is_meta
    ]
    if not named:
        return []
    finite = torch.stack([torch.isfinite(tensor).all() for _, tensor in named]).cpu()
    return [name for (name, _), ok in zip(named, finite.tolist(), strict=True) if not ok]


def _listed(names: list[str]) -> str:
    return f"NaN or inf in {len(names)} tensor(s), first {names[0]}"


def load_classifier_on(path: str | Path, device) -> tuple[EncoderClassifier, object]:
    """``load_classifier``, then the safe transfer to ``device``: a meta tensor is restored
    from the weights the folder names (its ``encoder/``, or a LoRA model's base encoder)."""
    path = Path(path)
    model, tokenizer = load_classifier(path)
    meta = json.loads((path / FILE_NAME).read_text())
    return safe_to_device(
        model, device, checkpoint=meta.get("base_encoder") or path / "encoder"
    ), tokenizer
