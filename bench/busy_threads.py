"""Threads on a busy machine (issue #55 item 11): the recipe's training step at every core (what
finalize and predict took before) against the threads ``hpo.process.free_cpus`` leaves it,
beside a competing load of two single-thread trainings' worth of matmuls, as the real job's
finalize met them.

    python -m bench.run --only busy_threads          # 5 rounds; both cases once a round

One set-up (hardware_limit's recipe, float32, on the realistic sample at the real size); the
competitors start first and run for the whole measure, so the last minute's load the rule
reads includes them. Each round times STEPS steps at every core, then STEPS at the rule's
threads (alternated, so both meet the same load). Examples/s per case, the threads each took,
and the load the rule saw.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import torch

from bench.hardware_limit import recipe_setup
from bench.results import write_results
from bench.workload import encoder_path, sample_data
from hpo.fixtures.realistic import REAL_POSTS

NAME = "busy_threads"
DEFINITION = (
    "training examples/s of the recipe's step at every core against at the threads free_cpus "
    "chooses, beside two competing single-thread processes"
)
DEFAULTS = {"runs": 5}
STEPS = 4
COMPETITORS = 2
SETTLE_SECONDS = 45  # the 1-minute load average has risen to most of the competitors' load
COMPETITOR = (
    "import torch; torch.set_num_threads(1); a = torch.randn(768, 768)\n"
    "while True: a = torch.tanh(a @ a)"
)


def measure(args) -> None:
    from hpo.process import available_cpus, free_cpus

    encoder, encoder_name = encoder_path()
    data = sample_data(f"data-hardware-{REAL_POSTS}", REAL_POSTS)
    rivals = [subprocess.Popen([sys.executable, "-c", COMPETITOR]) for _ in range(COMPETITORS)]
    try:
        setup = recipe_setup(encoder, data, "no")
        batches = setup.batches(1)
        setup.step(next(batches))  # warm-up
        time.sleep(SETTLE_SECONDS)
        free = free_cpus()
        cases = {"every core (before)": available_cpus(), "free_cpus' choice": free.cpus}
        runs: dict[str, list[dict]] = {case: [] for case in cases}
        for _ in range(args.runs):
            for case, threads in cases.items():
                torch.set_num_threads(threads)
                examples, started = 0, time.perf_counter()
                for _, batch in zip(range(STEPS), batches, strict=False):
                    setup.step(batch)
                    examples += len(batch)
                runs[case].append(
                    {
                        "examples_per_s": round(examples / (time.perf_counter() - started), 3),
                        "threads": threads,
                        "load_1min": round(os.getloadavg()[0], 2),
                    }
                )
    finally:
        for rival in rivals:
            rival.kill()
    write_results(
        NAME,
        {
            "encoder": encoder_name,
            "data": f"{REAL_POSTS} generated realistic posts, the recipe (head_tail 256, float32)",
            "competing_load": f"{COMPETITORS} processes of single-thread 768x768 matmuls",
            "rule_saw": {"free": free.cpus, "available": free.available, "load": free.load},
        },
        runs,
        "examples_per_s",
        {"key": "free_cpus' choice", "at_least": _median(runs["every core (before)"])},
        definition=DEFINITION,
        also=("threads", "load_1min"),
        command=f"python -m bench.run --only {NAME} --runs {args.runs}",
    )


def _median(runs: list[dict]) -> float:
    values = sorted(run["examples_per_s"] for run in runs)
    return values[len(values) // 2]
