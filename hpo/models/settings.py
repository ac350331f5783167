"""Model settings as plain data, importable without torch (study specs use them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Head activation name -> its torch.nn class, by name so this module stays torch-free.
ACTIVATIONS = {"gelu": "GELU", "relu": "ReLU", "tanh": "Tanh", "silu": "SiLU"}


@dataclass(frozen=True)
class HeadConfig:
    pooling: Literal["cls", "mean"] = "cls"
    hidden_layers: int = 0  # 0-3 hidden layers before the output layer
    hidden_size: int = 256
    activation: str = "gelu"
    dropout: float = 0.1
    # one logit per label (sigmoid): 1 for a yes/no pair, 9 for multilabel criteria
    num_labels: int = 1

    def __post_init__(self):
        if self.pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', not {self.pooling!r}")
        if not 0 <= self.hidden_layers <= 3:
            raise ValueError(f"hidden_layers must be 0-3, not {self.hidden_layers}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {', '.join(ACTIVATIONS)}, not {self.activation!r}"
            )
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), not {self.dropout}")


@dataclass(frozen=True)
class LoraSettings:
    r: int = 8
    alpha: int = 16
    dropout: float = 0.05
    # comma-separated module names, "all-linear", or None: peft's default
    target_modules: str | None = None

    def target_list(self) -> list[str] | str | None:
        if self.target_modules in (None, "all-linear"):
            return self.target_modules
        return [name.strip() for name in self.target_modules.split(",") if name.strip()]
