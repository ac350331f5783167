"""The training loss: binary cross-entropy per label, optionally label-smoothed and focal.

Hand-written because the one maintained sigmoid focal loss (torchvision.ops) comes with a
torchvision build that must match torch exactly; the formula is four lines.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def bce_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    pos_weight: torch.Tensor | None = None,
    label_smoothing: float = 0.0,
    focal_gamma: float = 0.0,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Summed over examples and labels (those ``mask`` keeps, when given). ``label_smoothing``
    ε pulls targets to ε/2 and 1-ε/2; ``focal_gamma`` γ scales each term by (1 - p_t)^γ (Lin
    et al., 2017), so confidently right examples, most of the unannotated negatives, weigh
    less."""
    targets = labels * (1 - label_smoothing) + label_smoothing / 2
    loss = F.binary_cross_entropy_with_logits(
        logits, targets, pos_weight=pos_weight, weight=mask, reduction="none"
    )
    if focal_gamma:
        p = torch.sigmoid(logits)
        p_true = p * labels + (1 - p) * (1 - labels)
        loss = loss * (1 - p_true) ** focal_gamma
    return loss.sum()
