"""What a run builds before its first optimizer step, and that step: shared by the training
loop and by ``time_steps`` (``hpo validate --estimate``), so a timing measures the real thing."""

from __future__ import annotations

import functools
import itertools
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from hpo.data.collate import Collator, length_grouped_batches
from hpo.models.classifier import build_classifier
from hpo.models.device import forward_keys, safe_to_device
from hpo.models.hardware import check_gpus, cpu_has_native_bf16, resolve_device
from hpo.train.config import TrainConfig
from hpo.train.evaluate import sequence_logits
from hpo.train.formulations import formulation_of
from hpo.train.losses import bce_loss
from hpo.train.optim import build_optimizer, freeze_bottom
from hpo.train.prepare import PreparedData, PreparedSplit, prepare_data
from hpo.train.schedule import warmup_schedule
from hpo.train.step import StepContext


@dataclass
class Setup:
    """A model on its device with its optimizer, schedule and data, ready to step."""

    config: TrainConfig
    device: torch.device
    data: PreparedData
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: object
    scaler: torch.amp.GradScaler | None
    autocast: Callable
    collate: Collator
    loss_fn: Callable
    steps_per_epoch: int
    micro: int  # sequences per forward pass, after any out-of-memory back-off
    max_tokens: int | None
    label_weights: np.ndarray | None = None  # StepContext's

    def batches(self, epoch: int) -> Iterator[list[int]]:
        """The epoch's batches of training examples, length-grouped, in the run's order."""
        config = self.config
        sample = self.data.train.training_sample(
            config.evidence_negative_ratio, config.seed + epoch
        )
        lengths = self.data.train.tokens.lengths[sample]
        for planned in length_grouped_batches(lengths, config.batch_size, seed=config.seed + epoch):
            yield sample[planned].tolist()

    @property
    def context(self) -> StepContext:
        """What a step's forward and backward passes run with."""
        return StepContext(
            self.model,
            self.collate,
            self.loss_fn,
            self.autocast,
            self.scaler,
            self.optimizer,
            self.device,
            self.max_tokens,
            self.label_weights,
        )

    def step(self, batch: list[int]) -> tuple[torch.Tensor, int]:
        """One optimizer step on ``batch``; its loss and the tokens its forward passes read."""
        config = self.config
        self.micro, loss, read = formulation_of(config.formulation).accumulate(self, batch)
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        if config.max_grad_norm:
            nn.utils.clip_grad_norm_(self.model.parameters(), config.max_grad_norm)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss, read

    def score_chunks(self, sequence_ids, sentences: bool = False):
        """A long post's chunks (or whole_post windows' sentences), scored without a graph to
        pick what trains."""
        return sequence_logits(
            self.model,
            self.data.train.tokens,
            sequence_ids,
            self.collate,
            self.config.eval_batch_size,
            self.device,
            self.autocast,
            self.config.inference_token_budget(self.device.type),
            sentences,
        )

    def score_windows(self, sequence_ids):
        return self.score_chunks(sequence_ids, sentences=True)


def set_up(config: TrainConfig) -> Setup:
    """Seed, data, model (meta-safe, on its device), optimizer, schedule, loss: in this order,
    so a run's random draws do not depend on who set it up."""
    _seed(config)
    device = resolve_device(config.device)
    data = prepare_data(config)
    model = build_classifier(
        config.task,
        config.encoder,
        config.head_config(data.train.num_labels),
        config.encoder_dropout,
        lora=config.lora_settings(),
        attention_dropout=config.attention_dropout,
    )
    model = safe_to_device(model, device, checkpoint=config.encoder)
    freeze_bottom(model, config.freeze_layers)
    if config.activation_checkpointing:
        model.encoder.activation_checkpointing_enable()
    if config.gpus_per_trial > 1:  # one trial on several GPUs; methods via unwrap_model
        check_gpus(config.gpus_per_trial)
        model = nn.DataParallel(model, device_ids=list(range(config.gpus_per_trial)))
    # after the transfer: restored tensors are new objects
    optimizer = build_optimizer(model, config, device)
    sample = data.train.training_sample(config.evidence_negative_ratio, config.seed)
    steps_per_epoch = -(-len(sample) // config.batch_size)
    scheduler = warmup_schedule(
        optimizer,
        config.scheduler,
        warmup_steps=int(config.warmup_ratio * steps_per_epoch * config.epochs),
        total_steps=steps_per_epoch * config.epochs,
    )
    amp_dtype = _amp_dtype(config.mixed_precision, device)
    autocast = (lambda: torch.autocast(device.type, dtype=amp_dtype)) if amp_dtype else nullcontext
    loss_fn = functools.partial(
        bce_loss,
        pos_weight=_positive_weights(data.train, sample, config.class_weighting, device),
        label_smoothing=config.label_smoothing,
        focal_gamma=config.focal_gamma,
    )
    return Setup(
        config=config,
        device=device,
        data=data,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        scaler=torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None,
        autocast=autocast,
        collate=Collator(
            data.tokenizer.pad_token_id,
            pad_to_multiple_of=8 if device.type == "cuda" else None,
            keep_keys=forward_keys(model),
        ),
        loss_fn=loss_fn,
        steps_per_epoch=steps_per_epoch,
        micro=config.micro_batch_size or config.batch_size,
        max_tokens=config.token_budget(device.type),
        label_weights=_label_weights(data.train, config),
    )


@dataclass(frozen=True)
class StepTiming:
    seconds_per_token: float  # training (forward + backward + step), timed
    timed_steps: int
    train_tokens_per_epoch: int  # what an epoch's forward passes read, padding excluded
    validation_tokens: int
    steps_per_epoch: int
    setup_seconds: float  # data, model load and transfer: paid once per trial
    device: str
    threads: int


def time_steps(config: TrainConfig, steps: int = 3) -> StepTiming:
    """Time ``steps`` optimizer steps of the real run (after one warm-up step), per token read:
    an epoch's cost scales with its tokens, so a few batches of any length tell it."""
    started = time.perf_counter()
    setup = set_up(config)
    setup_seconds = time.perf_counter() - started
    setup.model.train()
    # epoch after epoch: a small training split may hold fewer batches than the timing wants
    batches = (batch for epoch in itertools.count(1) for batch in setup.batches(epoch))
    setup.step(next(batches))  # warm-up: first-call allocations and kernel choices
    seconds, tokens, timed = 0.0, 0, 0
    for batch in batches:
        if timed == steps:
            break
        began = time.perf_counter()
        setup.step(batch)
        seconds += time.perf_counter() - began
        tokens += int(setup.data.train.tokens.lengths[batch].sum())  # every chunk, as below
        timed += 1
    train, validation = setup.data.train, setup.data.validation
    sample = train.training_sample(config.evidence_negative_ratio, config.seed)
    return StepTiming(
        seconds_per_token=seconds / max(tokens, 1),
        timed_steps=timed,
        train_tokens_per_epoch=int(train.tokens.lengths[sample].sum()),
        validation_tokens=int(validation.tokens.lengths.sum()),
        steps_per_epoch=setup.steps_per_epoch,
        setup_seconds=setup_seconds,
        device=str(setup.device),
        threads=torch.get_num_threads(),
    )


def _amp_dtype(mode: str, device: torch.device) -> torch.dtype | None:
    """auto: bf16 (fp16 on GPUs without it); on CPU bf16 only with native bf16 units,
    where it runs matmuls 2-3x faster; elsewhere it would be slower than float32."""
    if mode == "no":
        return None
    if mode == "auto" and device.type == "cpu":
        return torch.bfloat16 if cpu_has_native_bf16() else None
    if mode == "bf16" or (mode == "auto" and torch.cuda.is_bf16_supported()):
        return torch.bfloat16
    return torch.float16


def _label_weights(train: PreparedSplit, config: TrainConfig) -> np.ndarray | None:
    """Per training example and label, what its loss weighs: 1 + ``hard_negative_weight`` for
    a symptom the post touches without showing it, 1 elsewhere; None where nothing weighs more
    (whole_post trains its hard negatives sentence by sentence, ``hpo.train.posts``)."""
    weight = config.hard_negative_weight
    if not weight or train.hard_negatives is None or train.traits.scores_sentences:
        return None
    return 1 + weight * train.hard_negatives


def _positive_weights(
    split: PreparedSplit, sample: np.ndarray, mode: str, device
) -> torch.Tensor | None:
    """BCE's pos_weight per label from the examples an epoch trains on: negatives / positives
    (balanced) or its square root (sqrt)."""
    if mode == "none":
        return None
    labels = split.tokens.labels[sample].reshape(len(sample), -1)
    positives = labels.sum(0).astype(np.float64)
    weights = (len(sample) - positives) / np.maximum(positives, 1)
    if mode == "sqrt":
        weights = np.sqrt(weights)
    return torch.tensor(weights, dtype=torch.float32, device=device)


def _seed(config: TrainConfig) -> None:
    """Python, NumPy and torch (every GPU too) seeded from config.seed, as transformers.set_seed
    does. ``deterministic`` also makes torch use deterministic kernels, as transformers'
    enable_full_determinism does (slower; process-wide, so it stays on for the worker's later
    trials: set it for the whole study, in train). Not imported from transformers: see
    schedule.py."""
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)  # seeds every CUDA device too
    if config.deterministic:
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":16:8"
        os.environ["FLASH_ATTENTION_DETERMINISTIC"] = "1"
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
