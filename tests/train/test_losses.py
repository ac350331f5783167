"""The loss: binary cross-entropy per logit, with label smoothing and the focal weighting."""

from __future__ import annotations

import pytest
import torch

from hpo.train.losses import bce_loss


def test_label_smoothing_and_focal_loss_match_their_formulas():
    logits = torch.tensor([[2.0, -1.0], [0.5, 3.0]])
    labels = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.sigmoid(logits)
    plain = -(labels * p.log() + (1 - labels) * (1 - p).log())
    assert bce_loss(logits, labels).item() == pytest.approx(plain.sum().item(), rel=1e-6)
    smoothed = labels * 0.9 + 0.05
    expected = -(smoothed * p.log() + (1 - smoothed) * (1 - p).log()).sum()
    assert bce_loss(logits, labels, label_smoothing=0.1).item() == pytest.approx(
        expected.item(), rel=1e-6
    )
    p_true = torch.where(labels == 1, p, 1 - p)
    focal = (plain * (1 - p_true) ** 2).sum()
    assert bce_loss(logits, labels, focal_gamma=2.0).item() == pytest.approx(focal.item(), rel=1e-6)
    # easy examples weigh less
    assert bce_loss(logits, labels, focal_gamma=2.0) < bce_loss(logits, labels)
