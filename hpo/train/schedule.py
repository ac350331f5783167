"""Learning-rate schedules: linear, cosine or constant after a linear warm-up.

The formulas are transformers' ``get_scheduler`` ones (``tests/train/test_schedule.py``
compares them step by step). Written here because importing ``transformers.optimization`` imports
``transformers.trainer_utils``, which imports peft whenever it is installed: about 2 s on every
worker's start, for three one-line functions.
"""

from __future__ import annotations

import math
from typing import Literal

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

Schedule = Literal["linear", "cosine", "constant"]


def warmup_schedule(
    optimizer: Optimizer, kind: Schedule, warmup_steps: int, total_steps: int
) -> LambdaLR:
    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        if kind == "constant":
            return 1.0
        if kind == "linear":
            return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        # cosine: half a cycle, as transformers'
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    return LambdaLR(optimizer, factor)
