"""How a measure runs and records: study files, timed commands, a fresh process's peak memory,
and the results-file writers the measures share. What they train on is bench/workload.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import yaml

from bench.results import write_results

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "_runs" / "bench"


def child_env(threads: int | str, checkout: Path = REPO) -> dict[str, str]:
    """The environment of a measure's child process: ``threads`` torch/BLAS threads, offline,
    importing hpo (and bench) from ``checkout``."""
    threads = str(threads)
    return {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
            "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(checkout)}  # fmt: skip


def write_spec(name: str, **fields) -> Path:
    path = RUNS / "specs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"name": name, **fields}, sort_keys=False))
    return path


def timed_run(
    cmd: list[str], env: dict | None = None, timeout: int = 1800, cwd: Path = REPO
) -> tuple[float, subprocess.CompletedProcess]:
    """Wall time of a whole command, process start-up and imports included, as a user waits
    for it; ``cwd`` (``python -m`` imports hpo from there): another checkout's code."""
    started = time.perf_counter()
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    return elapsed, done


def hpo_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "hpo", *args]


# A fresh interpreter runs the command and reports its peak: RUSAGE_CHILDREN's running maximum
# then covers that one child alone (the kernel's wait4 ru_maxrss, in KiB on Linux).
_PEAK = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"exit_code": done.returncode, "stdout": done.stdout[-4000:], \
"stderr": done.stderr[-2000:],
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss \
/ 1024, 1)}))
"""


def peak_rss(cmd: list[str], env: dict | None = None) -> dict:
    """Run ``cmd`` once in a fresh process; its exit code, output tails and peak RSS in MiB."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *cmd],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# One trial as a worker runs it: 2 torch threads and its host-memory ceiling set (above it the
# worker hands glibc's freed heap back; never reached here). Its last line: what it got.
TRIAL = """
import json, sys, time
from hpo.train.config import TrainConfig
from hpo.train.loop import train
from hpo.train.memory import set_memory_ceiling
import torch
torch.set_num_threads(2)
set_memory_ceiling(20_000)
settings = json.loads(sys.argv[1])
started = time.perf_counter()
result = train(TrainConfig(**settings))
print(json.dumps({"seconds": time.perf_counter() - started, \
"post_macro_f1": result.metrics["post_macro_f1"],
                  "micro_batch_size": result.micro_batch_size}))
"""


def trial_peak(settings: dict) -> dict:
    """One TRIAL of ``settings`` (TrainConfig's fields) in a fresh process: its peak RSS in MiB,
    seconds, post macro-F1 and micro-batch size; a trial that fails raises with its errors."""
    done = peak_rss(
        [sys.executable, "-c", TRIAL, json.dumps(settings)], env={"OMP_NUM_THREADS": "2"}
    )
    if done["exit_code"] != 0:
        raise RuntimeError(f"a trial of {settings} failed:\n{done['stderr']}")
    return {
        "peak_rss_mb": done["peak_rss_mb"],
        **json.loads(done["stdout"].strip().splitlines()[-1]),
    }


class Headline(NamedTuple):
    """One results file a measure's runs go into: its name, the case its headline is taken from,
    that figure and its target bound, the definition, and the figures recorded beside it."""

    name: str
    case: str
    figure: str
    bound: dict
    definition: str
    also: tuple[str, ...] = ()


def write_headlines(
    headlines: tuple[Headline, ...], runs: dict[str, list[dict]], load: dict, command: str
) -> None:
    """One results file per headline, from ``runs`` by file name, with one workload and command."""
    for one in headlines:
        write_results(
            one.name,
            load,
            {one.case: runs[one.name]},
            one.figure,
            {"key": one.case, **one.bound},
            definition=one.definition,
            also=one.also,
            command=command,
        )


def repeated(
    measure: str,
    run_once,
    runs: int,
    load: dict,
    definition: str,
    target: dict | None = None,
    value: str = "ratio",
) -> None:
    """A measure whose one run is a whole function call: ``runs`` calls of ``run_once``, each a
    run, into one results file."""
    results = []
    for run_no in range(runs):
        results.append(run_once())
        print(f"[{measure} run {run_no + 1}] {value} {results[-1].get(value)}", flush=True)
    write_results(
        measure,
        load,
        {measure: results},
        value,
        target and {"key": measure, **target},
        definition=definition,
        command=f"python -m bench.run --only {measure}",
    )
