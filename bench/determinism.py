"""The cost of ``deterministic: true``: wall time of the same trial with it and without, and
whether two deterministic runs agree bit for bit.

    python -m bench.run --only determinism
"""

from __future__ import annotations

import dataclasses
import statistics
import time

from bench.common import repeated
from bench.workload import described, encoder_path, sample_data
from hpo.train.config import TrainConfig
from hpo.train.loop import train

NAME = "determinism"
DEFINITION = "wall time of one trial with deterministic: true / without"
POSTS = 60  # P6's generated posts


def measure(args) -> None:
    """``args.runs`` runs, each two trials a side; no target: the table reads "measured"."""
    encoder, encoder_name = encoder_path()
    data = sample_data("data-p6", POSTS, args.data_dir)
    load = described(encoder_name, f"{POSTS} posts")
    repeated(NAME, lambda: determinism_cost(encoder, data), args.runs, load, DEFINITION)


def determinism_cost(encoder: str, data_dir: str, runs: int = 2) -> dict:
    """Wall time of the same trial with and without ``deterministic: true`` (transformers'
    enable_full_determinism), and whether two deterministic runs agree bit for bit."""
    import torch

    base = TrainConfig(
        task="criteria",
        encoder=encoder,
        data_dir=data_dir,
        criteria_formulation="multilabel",
        max_length=128,
        epochs=1,
        batch_size=16,
        objective_metric="macro_f1",
        mixed_precision="no",
    )
    seconds, values = {}, {}
    for deterministic in (False, True):  # off first: enable_full_determinism is process-wide
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            result = train(dataclasses.replace(base, deterministic=deterministic))
            times.append(time.perf_counter() - started)
            values.setdefault(deterministic, []).append(result.metrics)
        seconds[deterministic] = statistics.median(times)
    torch.use_deterministic_algorithms(False)
    return {
        "ratio": seconds[True] / seconds[False],
        "seconds": {"off": seconds[False], "on": seconds[True]},
        "bitwise_equal_reruns": values[True][0] == values[True][1],
        "command": "python -m bench.run --only determinism",
    }
