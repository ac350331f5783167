"""A trial's set-up: seeded as transformers seeds, repeatably, and with deterministic kernels
when asked."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import torch
from transformers import set_seed

from hpo.train.config import TrainConfig
from hpo.train.setup import _seed


def test_seeding_draws_what_transformers_set_seed_draws():
    def draws():
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    _seed(TrainConfig(task="criteria", encoder="x", data_dir="unused", seed=123))
    ours = draws()
    set_seed(123)
    assert draws() == ours


def test_seeds_repeat_and_deterministic_turns_on_deterministic_kernels(monkeypatch):
    from hpo.train.setup import _seed

    for name in (
        "CUDA_LAUNCH_BLOCKING",
        "CUBLAS_WORKSPACE_CONFIG",
        "ASCEND_LAUNCH_BLOCKING",
        "HCCL_DETERMINISTIC",
        "FLASH_ATTENTION_DETERMINISTIC",
    ):
        # enable_full_determinism sets them process-wide
        monkeypatch.setenv(name, "restored after the test")
    config = TrainConfig(task="criteria", encoder="x", data_dir="unused", seed=5)
    _seed(config)
    first = (torch.rand(3), np.random.rand())
    _seed(config)
    assert torch.equal(first[0], torch.rand(3)) and first[1] == np.random.rand()
    assert not torch.are_deterministic_algorithms_enabled()
    try:
        _seed(dataclasses.replace(config, deterministic=True))
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = False, False
