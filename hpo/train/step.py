"""One optimizer step's forward and backward passes, with memory bounded by sequences, not posts.

With ``long_text: chunks`` a post is one to dozens of overlapping windows whose logits are
max-pooled per label (``evaluate.split_probabilities``). Max-pooling sends each label's gradient
to one chunk only, the one with the largest logit. So a step first scores the chunks of its
multi-chunk examples without an autograd graph, in bounded batches, then trains on each
label's winning chunk alone, each carrying the loss of the labels it wins. The gradient is
max-pooling's over all chunks (chunks are picked in eval mode, so under dropout another
chunk may have won), and a forward/backward pass holds ``micro`` sequences at most, however
long the posts a batch draws: a 45-chunk post costs at most 9 sequences of backward
(multilabel; 1 for pairs and evidence), not 45.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from hpo.data.tokenized import TokenizedSplit
from hpo.errors import OutOfMemoryError
from hpo.train.memory import guard_host_memory, memory_ceiling_mb, release_free_memory

ChunkScorer = Callable[[np.ndarray], np.ndarray]  # sequence ids -> their logits, (n, labels)


@dataclass(frozen=True)
class StepUnits:
    """What one step trains on: per unit a sequence, the example it belongs to, and the
    labels whose loss it carries (every label for an example of one sequence)."""

    sequences: np.ndarray  # (n,)
    examples: np.ndarray  # (n,)
    masks: np.ndarray  # (n, labels), bool

    def __len__(self) -> int:
        return len(self.sequences)


def plan_units(
    tokens: TokenizedSplit, batch: list[int], num_labels: int, score_chunks: ChunkScorer
) -> StepUnits:
    """The units of ``batch``; ``score_chunks`` is called once, for the multi-chunk examples'
    chunks."""
    batch = np.asarray(batch, dtype=np.int64)
    firsts, counts = tokens.offsets[batch], tokens.offsets[batch + 1] - tokens.offsets[batch]
    single = counts == 1
    sequences, examples = [firsts[single]], [batch[single]]
    masks = [np.ones((int(single.sum()), num_labels), dtype=bool)]
    if not single.all():
        multi_firsts, multi_counts = firsts[~single], counts[~single]
        chunk_ids = np.concatenate(
            [np.arange(f, f + c) for f, c in zip(multi_firsts, multi_counts, strict=True)]
        )
        logits = score_chunks(chunk_ids)
        start = 0
        for example, count in zip(batch[~single], multi_counts, strict=True):
            # per label: the chunk holding its max
            winners = logits[start : start + count].argmax(0)
            for winner in np.unique(winners):
                sequences.append(chunk_ids[start + winner : start + winner + 1])
                examples.append(np.array([example]))
                masks.append((winners == winner)[None])
            start += count
    return StepUnits(np.concatenate(sequences), np.concatenate(examples), np.concatenate(masks))


@dataclass(frozen=True)
class StepContext:
    """What every forward and backward pass of a step runs with: the model, how a batch is
    collated, scored and back-propagated, and the optimizer an out-of-memory back-off clears."""

    model: torch.nn.Module
    collate: Callable
    loss_fn: Callable
    autocast: Callable
    scaler: torch.amp.GradScaler | None
    optimizer: torch.optim.Optimizer
    device: torch.device
    max_tokens: int | None = None  # tokens per training forward pass at most
    # per training example and label, what its loss weighs (hard negatives more); None: 1
    label_weights: np.ndarray | None = None


def accumulate_gradients(
    context: StepContext, tokens: TokenizedSplit, units: StepUnits, n_examples: int, micro: int
) -> tuple[int, torch.Tensor]:
    """Forward/backward over ``units`` in micro-batches of ``micro`` sequences, and of at most
    ``max_tokens`` tokens (padded to the step's longest sequence); returns the micro-batch size
    that worked and the step's loss (a tensor: reading it would wait for the device). On
    out-of-memory (the device's, or the worker's host-memory ceiling): free, halve the
    micro-batch and redo the whole step. No data is ever skipped; the loss is divided by the
    step's examples, so any split gives the same gradient."""
    model, device, scaler = context.model, context.device, context.scaler
    longest = max(len(tokens.input_ids[j]) for j in units.sequences)

    def attempt(size: int) -> torch.Tensor:
        total = torch.zeros((), device=device)
        for start in range(0, len(units), size):
            part = slice(start, start + size)
            examples, masks = units.examples[part], units.masks[part]
            labels = torch.as_tensor(
                tokens.labels[examples].reshape(len(examples), -1),
                dtype=torch.float32,
                device=device,
            )
            weights = (
                masks if context.label_weights is None else masks * context.label_weights[examples]
            )
            mask = (  # None where every cell weighs 1: the plain loss
                None
                if (weights == 1).all()
                else torch.as_tensor(weights, dtype=torch.float32, device=device)
            )
            inputs = {
                k: v.to(device, non_blocking=True)
                for k, v in context.collate(tokens.features(units.sequences[part])).items()
            }
            with guard_host_memory():
                with context.autocast():
                    logits = model(**inputs)
                loss = context.loss_fn(logits.float(), labels, mask=mask) / n_examples
                (scaler.scale(loss) if scaler else loss).backward()
            total += loss.detach()
            del logits, loss
        return total

    return with_backoff(
        attempt, micro, context.optimizer, device, passes_of(micro, context.max_tokens, longest)
    )


def passes_of(micro: int, max_tokens: int | None, longest: int) -> Callable[[int], int]:
    """Sequences per forward pass: ``micro`` at most, and no more than ``max_tokens`` tokens
    at the width of the step's longest sequence."""
    return lambda micro: min(micro, max(1, max_tokens // longest)) if max_tokens else micro


def with_backoff(
    attempt: Callable[[int], torch.Tensor],
    micro: int,
    optimizer,
    device,
    passes: Callable[[int], int] = lambda micro: micro,
) -> tuple[int, torch.Tensor]:
    """``attempt(size)``: a step's forward and backward passes of ``size`` sequences each. On
    out-of-memory (the device's, or the worker's host-memory ceiling): free, halve and redo
    the whole step; returns the micro-batch that worked and what the attempt returned."""
    while True:
        size = passes(micro)
        try:
            return micro, attempt(size)
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if not is_out_of_memory(exc):
                raise
            message = str(exc).splitlines()[0]
            del exc  # drop the traceback's references to the failed step's tensors
            optimizer.zero_grad(set_to_none=True)
            free_memory(device)
            if size == 1:
                ceiling = memory_ceiling_mb()
                raise OutOfMemoryError(
                    f"out of memory even at micro-batch 1 ({message}); "
                    "lower max_length, use a smaller encoder, "
                    "or enable activation_checkpointing"
                    + (
                        f"; or give each worker more than {ceiling:,.0f} MiB "
                        "(--memory-per-worker, fewer workers)"
                        if ceiling
                        else ""
                    )
                ) from None
            micro = max(1, size // 2)


def is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text
    )


def free_memory(device: torch.device) -> None:
    gc.collect()
    release_free_memory()  # freed host pages back to the system, so the ceiling sees the drop
    if device.type == "cuda":
        torch.cuda.empty_cache()
