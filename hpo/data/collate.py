"""Turn tokenized examples into padded batches, and plan batches that waste little padding."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import torch

# sentence_index: whole_post's per-token sentence (-1: none), padded with -1
PADDED_KEYS = ("input_ids", "attention_mask", "token_type_ids", "sentence_index")
DEFAULT_KEYS = frozenset({*PADDED_KEYS, "labels"})


def coerce_long(value: Any, name: str) -> torch.Tensor:
    """Return ``value`` as a torch.long tensor, refusing values that are not whole numbers.

    Accepts tensors, numpy arrays, (nested, rectangular) lists, Python ints and integral
    floats such as ``1.0``: labels read from CSV or produced by pandas often arrive as floats.
    """
    if isinstance(value, torch.Tensor):
        tensor = value
    else:
        try:
            array = np.asarray(value)
        except ValueError:  # numpy refuses ragged nested lists
            raise ValueError(f"{name} must be a rectangular array; got ragged rows") from None
        if array.dtype.kind not in "biuf":
            raise ValueError(f"{name} must hold integers; got dtype {array.dtype}")
        wide = np.float64 if array.dtype.kind == "f" else np.int64
        tensor = torch.from_numpy(array.astype(wide, order="C"))
    if tensor.is_complex():
        raise ValueError(f"{name} must hold integers; got dtype {tensor.dtype}")
    if tensor.is_floating_point():
        _check_integral(tensor, name)
    return tensor.long()


def _check_integral(tensor: torch.Tensor, name: str) -> None:
    bad = ~torch.isfinite(tensor) | (tensor != torch.round(tensor))
    if not bad.any():
        return
    if tensor.dim() == 0:
        raise ValueError(f"{name} must hold integers; got {tensor.item()}")
    position = torch.nonzero(bad)[0].tolist()
    value = tensor[tuple(position)].item()
    where = position[0] if len(position) == 1 else tuple(position)
    raise ValueError(f"{name} must hold integers; got {value} at position {where}")


class Collator:
    """Pads each batch to its own longest example and keeps only the keys the model takes.

    ``keep_keys``: the keyword names the model's ``forward`` accepts (the training loop
    reads them off the model); None keeps the padded keys and ``labels``. ``input_ids``
    and ``labels`` are always kept, the latter so the loop can compute the loss. Kept
    keys beyond the padded ones (an ``idx``, say) are stacked as integers; every other
    key (a string ``post_id``) is dropped.
    """

    def __init__(
        self,
        pad_token_id: int,
        pad_to_multiple_of: int | None = None,
        keep_keys: Collection[str] | None = None,
    ):
        if pad_to_multiple_of is not None and pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of must be positive; got {pad_to_multiple_of}")
        self.pad_values = {
            "input_ids": pad_token_id,
            "attention_mask": 0,
            "token_type_ids": 0,
            "sentence_index": -1,
        }
        self.pad_to_multiple_of = pad_to_multiple_of
        self.keep_keys = DEFAULT_KEYS if keep_keys is None else frozenset(keep_keys) | {"labels"}

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if not features:
            raise ValueError("cannot collate an empty batch")
        input_ids = [coerce_long(f["input_ids"], "input_ids") for f in features]
        lengths = [len(row) for row in input_ids]
        width = self._padded_width(max(lengths))
        batch = {"input_ids": self._pad("input_ids", input_ids, lengths, width)}
        if "attention_mask" in self.keep_keys:
            if "attention_mask" in features[0]:
                masks = [coerce_long(f["attention_mask"], "attention_mask") for f in features]
            else:  # without a mask the model would attend to the padding
                masks = [torch.ones(n, dtype=torch.long) for n in lengths]
            batch["attention_mask"] = self._pad("attention_mask", masks, lengths, width)
        for key in ("token_type_ids", "sentence_index"):
            if key in self.keep_keys and key in features[0]:
                rows = [coerce_long(f[key], key) for f in features]
                batch[key] = self._pad(key, rows, lengths, width)
        for key in features[0]:
            if key not in PADDED_KEYS and key in self.keep_keys:
                batch[key] = _stack(key, [f[key] for f in features])
        return batch

    def _padded_width(self, longest: int) -> int:
        multiple = self.pad_to_multiple_of
        return longest if multiple is None else -(-longest // multiple) * multiple

    def _pad(
        self, key: str, rows: list[torch.Tensor], lengths: list[int], width: int
    ) -> torch.Tensor:
        padded = torch.full((len(rows), width), self.pad_values[key], dtype=torch.long)
        for i, (row, length) in enumerate(zip(rows, lengths, strict=True)):
            if row.shape != (length,):
                raise ValueError(
                    f"{key} of example {i} has shape {tuple(row.shape)}; input_ids has ({length},)"
                )
            padded[i, :length] = row
        return padded


def _stack(name: str, values: list[Any]) -> torch.Tensor:
    if all(isinstance(v, torch.Tensor) for v in values):
        return coerce_long(torch.stack(values), name)
    return coerce_long(values, name)


def length_grouped_batches(
    lengths: Sequence[int] | np.ndarray,
    batch_size: int,
    seed: int,
    mega_batch_mult: int = 50,
) -> list[list[int]]:
    """Training batches of similar length, in shuffled order; every index appears once.

    Shuffle, cut into mega-batches of ``batch_size * mega_batch_mult``, sort each by
    length and cut it into batches: randomness stays, padding mostly goes. The batch
    holding the longest example runs first so an out-of-memory error shows on step one.
    """
    _check_batch_size(batch_size)
    lengths = np.asarray(lengths)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths))
    mega = batch_size * mega_batch_mult
    batches: list[list[int]] = []
    for start in range(0, len(order), mega):
        chunk = order[start : start + mega]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches += [chunk[i : i + batch_size].tolist() for i in range(0, len(chunk), batch_size)]
    batches = [batches[i] for i in rng.permutation(len(batches))]
    if batches:
        longest = int(np.argmax([lengths[b].max() for b in batches]))
        batches[0], batches[longest] = batches[longest], batches[0]
    return batches


def sorted_batches(lengths: Sequence[int] | np.ndarray, batch_size: int) -> list[list[int]]:
    """Evaluation batches, longest first; every index appears once."""
    _check_batch_size(batch_size)
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]


def _check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive; got {batch_size}")
