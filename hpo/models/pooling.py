"""whole_post: a post's sentence scores pooled into its score per symptom.

A symptom stated in one sentence is in the post, so pooling is a maximum, or a smooth one:
``max`` (the gradient reaches the top sentence only), ``logsumexp`` (log-mean-exp at sharpness
``SHARPNESS``: between the mean and the maximum, every sentence learns in proportion to its
share) and ``attention`` (a learned gate per sentence and symptom weighs the sentences' logits;
Ilse et al., 2018). Hand-written: a few scatter operations over a flat list of sentences, which
no maintained library offers for posts of varying length.
"""

from __future__ import annotations

import torch

from hpo.vocabulary import PostPooling

# log-mean-exp sharpness: a post of n sentences with one at logit x and the rest far below
# scores x - log(n) / 5, so 50 sentences cost 0.8 logits against one; the mean's cost is x * 49/50
SHARPNESS = 5.0


def pool_posts(
    logits: torch.Tensor,
    example_of: torch.Tensor,
    n_examples: int,
    pooling: PostPooling,
    gates: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per example (post) and label, its sentences' ``logits`` (sentences, labels) pooled;
    ``example_of`` (sentences,) says whose sentence each row is. Every example needs one
    sentence at least. ``gates`` (sentences, labels): attention pooling's."""
    index = example_of[:, None].expand_as(logits)
    shape = (n_examples, logits.shape[1])

    def per_example_max(values: torch.Tensor) -> torch.Tensor:
        empty = torch.full(shape, float("-inf"), dtype=values.dtype, device=values.device)
        return empty.scatter_reduce(0, index, values, "amax", include_self=False)

    def per_example_sum(values: torch.Tensor) -> torch.Tensor:
        return torch.zeros(shape, dtype=values.dtype, device=values.device).scatter_add(
            0, index, values
        )

    if pooling == "max":
        return per_example_max(logits)
    if pooling == "logsumexp":
        top = per_example_max(logits).detach()  # shifts exp into range; the value is unchanged
        total = per_example_sum(torch.exp(SHARPNESS * (logits - top[example_of])))
        count = torch.bincount(example_of, minlength=n_examples).to(logits.dtype)[:, None]
        return top + torch.log(total / count) / SHARPNESS
    if gates is None:
        raise ValueError("attention pooling needs the sentences' gates")
    weights = torch.exp(gates - per_example_max(gates).detach()[example_of])
    return per_example_sum(weights * logits) / per_example_sum(weights)


def sentence_weights(
    logits: torch.Tensor, example_of: torch.Tensor, n_examples: int
) -> torch.Tensor:
    """Per sentence and label, its softmax share among its post's sentences: how much of the
    post's evidence the model puts on it (the sentence loss reads this)."""
    index = example_of[:, None].expand_as(logits)
    shape = (n_examples, logits.shape[1])
    top = torch.full(shape, float("-inf"), dtype=logits.dtype, device=logits.device)
    top = top.scatter_reduce(0, index, logits, "amax", include_self=False).detach()
    weights = torch.exp(logits - top[example_of])
    total = torch.zeros(shape, dtype=logits.dtype, device=logits.device).scatter_add(
        0, index, weights
    )
    return weights / total[example_of]
