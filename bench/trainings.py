"""The recipe's trainings a bench runs in child processes, ``parallel`` at a time of ``threads``
torch threads each (the real job's two workers of one thread), each kept in its folder with
its seconds, so that a rerun or a cut-short bench rescores what it trained.

    python -m bench.trainings SETTINGS_JSON      # one training: what ``train_all`` starts
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import REPO, child_env
from bench.workload import recipe_config

TIMING = "wall_s.txt"  # beside each model: its training's seconds, for a rerun that rescores


def settings(
    encoder, data_dir, max_length: int, seed: int, point: dict, folder: Path, cache: Path, **more
) -> dict:
    """One training as plain data a child process takes: the recipe moved by ``point`` (any
    TrainConfig fields) on ``seed``, into ``folder``; ``more``: recipe_config's other settings
    (split_seed 0 unless given: one split, the runs differing in training alone)."""
    return {
        "encoder": encoder,
        "data_dir": str(data_dir),
        "max_length": max_length,
        "seed": seed,
        "point": point,
        "folder": str(folder),
        "cache": str(cache),
        "more": {"split_seed": 0, **more},
    }


def config_of(job: dict):
    return recipe_config(
        job["encoder"],
        job["data_dir"],
        job["max_length"],
        job["seed"],
        checkpoint_dir=job["folder"],
        cache_dir=job["cache"],
        **job["more"],
        **job["point"],
    )


def trained(job: dict) -> bool:
    folder = Path(job["folder"])
    return (folder / "classifier.json").exists() and (folder / TIMING).exists()


def wall_seconds(job: dict) -> float:
    """The training's seconds, kept with its model."""
    return float((Path(job["folder"]) / TIMING).read_text())


def train_all(jobs: list[dict], parallel: int, threads: int, name: str) -> None:
    """Every job not trained yet, ``parallel`` child processes at a time."""
    untrained = [job for job in jobs if not trained(job)]

    def one(job: dict) -> None:
        command = [sys.executable, "-m", "bench.trainings", json.dumps(job)]
        subprocess.run(command, env=child_env(threads), cwd=REPO, check=True, capture_output=True)
        print(f"[{name}] trained {Path(job['folder']).name}", flush=True)

    with ThreadPoolExecutor(parallel) as pool:  # each training its own process
        list(pool.map(one, untrained))


def train_one(job: dict) -> None:
    """The child's whole job: one training, its seconds kept beside its model."""
    import torch

    from hpo.train.loop import train

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    started = time.perf_counter()
    train(config_of(job))
    (Path(job["folder"]) / TIMING).write_text(f"{time.perf_counter() - started:.1f}\n")


if __name__ == "__main__":  # the child train_all starts
    train_one(json.loads(sys.argv[1]))
