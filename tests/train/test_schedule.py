"""The learning-rate schedules the loop uses instead of transformers' (whose module imports
peft on every worker start) give transformers' values, step by step (its seeding:
test_setup.py)."""

import subprocess
import sys

import pytest
import torch
from transformers import get_scheduler

from hpo.train.schedule import warmup_schedule

TRANSFORMERS_NAME = {"linear": "linear", "cosine": "cosine", "constant": "constant_with_warmup"}


def _rates(make, steps: int) -> list[float]:
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    scheduler = make(optimizer)
    rates = []
    for _ in range(steps):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    return rates


@pytest.mark.parametrize("kind", ["linear", "cosine", "constant"])
@pytest.mark.parametrize(("warmup", "total"), [(0, 10), (3, 10), (10, 10), (7, 40)])
def test_each_schedule_matches_transformers_at_every_step(kind, warmup, total):
    ours = _rates(lambda opt: warmup_schedule(opt, kind, warmup, total), total + 2)
    theirs = _rates(
        lambda opt: get_scheduler(
            TRANSFORMERS_NAME[kind], opt, num_warmup_steps=warmup, num_training_steps=total
        ),
        total + 2,
    )
    assert ours == pytest.approx(theirs, abs=1e-12)


@pytest.mark.slow
def test_a_worker_start_does_not_import_peft():
    """peft costs ~2 s per process; the loop needs it only for adapter: lora."""
    code = "import sys, hpo.train.loop; print('peft' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
