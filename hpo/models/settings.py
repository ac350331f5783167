"""Model settings as plain data, importable without torch (study specs use them).

Checked by pydantic when built: from a training config, and from a saved classifier.json,
where ``head`` is read as a ``HeadConfig`` (strict: "8" is not a width, true not a count).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, Strict
from pydantic.dataclasses import dataclass

from hpo.vocabulary import PostPooling

Activation = Literal["gelu", "relu", "tanh", "silu"]
# Head activation name -> its torch.nn class, by name so this module stays torch-free.
ACTIVATIONS: dict[Activation, str] = {
    "gelu": "GELU",
    "relu": "ReLU",
    "tanh": "Tanh",
    "silu": "SiLU",
}
Pooling = Literal["cls", "mean"]
HiddenLayers = Annotated[int, Field(ge=0, le=3)]  # hidden layers before the output layer
Dropout = Annotated[float, Field(ge=0, lt=1)]  # a share of units dropped: 1 would drop all
_STRICT = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_STRICT)
class HeadConfig:
    pooling: Pooling = "cls"
    hidden_layers: Annotated[HiddenLayers, Strict()] = 0
    hidden_size: Annotated[int, Strict(), Field(ge=1)] = 256
    activation: Activation = "gelu"
    dropout: Annotated[Dropout, Strict()] = 0.1
    # one logit per label (sigmoid): 1 for a yes/no pair, 9 for multilabel criteria
    num_labels: Annotated[int, Strict(), Field(ge=1)] = 1
    # whole_post: the head scores each sentence (the mean of its tokens) and a post's sentence
    # scores pool by this; None: the head scores the sequence (``pooling``)
    post_pooling: PostPooling | None = None

    @property
    def outputs(self) -> int:
        """The output layer's width: a logit per label, and with attention pooling a gate per
        label beside it (the sentence's weight in its post's score)."""
        return self.num_labels * (2 if self.post_pooling == "attention" else 1)


@dataclass(frozen=True, config=_STRICT)
class LoraSettings:
    r: Annotated[int, Field(ge=1)] = 8
    alpha: Annotated[int, Field(ge=1)] = 16
    dropout: Dropout = 0.05
    # comma-separated module names, "all-linear", or None: peft's default
    target_modules: str | None = None

    def target_list(self) -> list[str] | str | None:
        if self.target_modules in (None, "all-linear"):
            return self.target_modules
        return [name.strip() for name in self.target_modules.split(",") if name.strip()]
