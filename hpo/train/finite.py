"""A run whose training diverges fails at once, saying where and what to change.

A learning rate far too large turns the weights to NaN within a step or two; left alone, the
run goes on, its validation scores are garbage that happens to beat chance (a model answering
the same for every post), and the trial becomes a study's best. So every step's loss is
watched, and every evaluation's probabilities, and the first that is not a finite number raises
``TrainingDiverged``: the trial fails with that line as its reason.

The loss is a device tensor; reading it waits for the device. On a CPU that costs nothing and
each step is checked as it ends. On a GPU the losses are kept and read together, once every
``CHECK_SECONDS`` and before any evaluation: the run stops seconds after diverging, never
judges a diverged model, and still names the step whose loss was first not finite.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from hpo.errors import TrainingDiverged
from hpo.train.config import TrainConfig

# how long a GPU run may train on after diverging, at most, before its losses are read
CHECK_SECONDS = 5.0


def what_to_change(config: TrainConfig) -> str:
    """The settings that make a run diverge, as they stand: the fix a failure names."""
    fix = f"lower learning_rate (now {config.learning_rate:g})"
    if config.head_learning_rate is not None:
        fix += f" or head_learning_rate (now {config.head_learning_rate:g})"
    if "evidence_loss_weight" in config.traits.reads and config.evidence_loss_weight:
        fix += f" or evidence_loss_weight (now {config.evidence_loss_weight:g})"
    if "hard_negative_weight" in config.traits.reads and config.hard_negative_weight:
        fix += f" or hard_negative_weight (now {config.hard_negative_weight:g})"
    if config.mixed_precision == "fp16":
        fix += ", or train with mixed_precision bf16 or no"
    return fix


class LossWatch:
    """Each step's loss in; ``TrainingDiverged`` out at the first that is NaN or inf."""

    def __init__(self, device: torch.device, fix: str):
        self.every_step = device.type != "cuda"  # reading a CPU tensor does not wait
        self.fix = fix
        self.pending: list[tuple[int, int, torch.Tensor]] = []  # (epoch, step, loss) unread
        self.checked = time.perf_counter()
        self.first = True  # no loss read yet: the next read holds the run's first step

    def step(self, epoch: int, step: int, loss: torch.Tensor) -> None:
        self.pending.append((epoch, step, loss.detach()))
        if self.every_step or time.perf_counter() - self.checked >= CHECK_SECONDS:
            self.check()

    def check(self) -> None:
        """Read the losses not read yet (one wait for the device) and raise at the first that
        is not finite."""
        self.checked = time.perf_counter()
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        losses = torch.stack([loss.float().reshape(()) for *_, loss in pending]).cpu()
        bad = (~torch.isfinite(losses)).nonzero()
        first, self.first = self.first, False
        if not len(bad):
            return
        epoch, step, _ = pending[int(bad[0])]
        said = f"loss became {_word(float(losses[int(bad[0])]))} at epoch {epoch} step {step}"
        if first and int(bad[0]) == 0:  # before any update: no learning rate made it so
            raise TrainingDiverged(
                f"{said}, before any update; check the encoder checkpoint (its weights may "
                "not be finite)"
            )
        raise TrainingDiverged(f"{said}; {self.fix}")


def check_scores(probs: np.ndarray | None, where: str, fix: str) -> None:
    """Raise ``TrainingDiverged`` when an evaluation's probabilities are not all finite: weights
    a last step turned to NaN (its loss was still finite) score every post ``nan``."""
    if probs is None or np.isfinite(probs).all():
        return
    value = _word(float(probs[~np.isfinite(probs)].flat[0]))
    raise TrainingDiverged(f"validation probabilities became {value} {where}; {fix}")


def _word(value: float) -> str:
    return "NaN" if math.isnan(value) else "inf" if value > 0 else "-inf"
