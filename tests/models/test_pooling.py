"""whole_post's pooling: a post's sentence scores pooled into its score per symptom."""

from __future__ import annotations

import numpy as np
import torch

from hpo.models.pooling import SHARPNESS, pool_posts, sentence_weights


def test_pooling_is_the_max_a_smooth_max_or_an_attention_over_each_posts_sentences():
    logits = torch.tensor([[1.0, -2.0], [3.0, 0.0], [2.0, 5.0]])
    post = torch.tensor([0, 0, 1])
    assert pool_posts(logits, post, 2, "max").tolist() == [[3.0, 0.0], [2.0, 5.0]]
    smooth = pool_posts(logits, post, 2, "logsumexp")
    expected = torch.log(torch.exp(SHARPNESS * logits[:2]).mean(0)) / SHARPNESS
    assert torch.allclose(smooth[0], expected) and torch.allclose(smooth[1], logits[2])
    assert (smooth[0] <= logits[:2].max(0).values).all()  # never above the max
    gates = torch.tensor([[0.0, 0.0], [float(np.log(3.0)), 0.0], [9.0, 9.0]])
    attended = pool_posts(logits, post, 2, "attention", gates)
    assert torch.allclose(attended[0], torch.tensor([0.25 * 1 + 0.75 * 3, -1.0]))
    weights = sentence_weights(logits, post, 2)
    assert torch.allclose(weights[:2].sum(0), torch.ones(2))
    assert torch.allclose(weights[2], torch.ones(2))
