"""Peak memory of one `long_text: chunks` trial on long-tailed posts, before and after
bounding a step.

    python -m bench.memory                    # this checkout against BEFORE_COMMIT,
                                              # writes bench/results/memory.json
    python -m bench.memory --runs 1 --only after

Workload: all-MiniLM-L6-v2 (offline), criteria multilabel, long_text chunks, 1 epoch, float32,
one process with 2 torch threads, on a realistic sample shaped like the real ReDSM5's tail: 1,484
generated posts (p99 ~3,300 tokens, max ~8,400), of which the 40 longest and 40 others drawn at
random are kept, so the batches that draw the longest posts (length-grouped batching puts them
together) are in the run. Each run is a fresh process; its peak RSS is the kernel's (wait4's
ru_maxrss). A "before" run that grows past CAP_MB is killed there and recorded as having crossed
it: the machine has 24 GiB, and the real job's figure (23.5 GB, then the OOM killer) needs no
re-enactment. "after x2 longest" doubles the longest post (to ~17,000 tokens) to show the peak
does not follow it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import REPO, RUNS
from bench.results import RESULTS, write_results
from bench.workload import encoder_path

BEFORE_COMMIT = "eb3db4a"  # the last commit before steps were bounded (#29)
CAP_MB = 10_000
CASES = [(16, 256), (32, 256), (16, 512), (32, 512)]  # (batch_size, max_length)
BEFORE_CASES = [
    (16, 256),
    (32, 512),
]  # the smallest and the largest: the code before grows with both
TRIAL = """
import json, sys, time
from hpo.train.config import TrainConfig
from hpo.train.loop import train
import torch
torch.set_num_threads(2)
try:
    from hpo.train.memory import set_memory_ceiling
    set_memory_ceiling(20_000)  # as a worker does (its ceiling is never reached here)
except ImportError:  # the code before #29
    pass
settings = json.loads(sys.argv[1])
started = time.perf_counter()
result = train(TrainConfig(**settings))
print(json.dumps({"seconds": time.perf_counter() - started, \
"post_macro_f1": result.metrics["post_macro_f1"],
                  "micro_batch_size": result.micro_batch_size}))
"""


def long_tailed_data(double_longest: bool = False) -> Path:
    """The 40 longest of 1,484 realistic posts and 40 others, with their annotations."""
    from hpo.fixtures import write_sample

    full = RUNS / "memory-1484"
    if not (full / "redsm5_posts.csv").exists():
        write_sample(full, posts=1484, seed=0, profile="realistic")
    out = RUNS / ("memory-tail-x2" if double_longest else "memory-tail")
    if (out / "redsm5_posts.csv").exists():
        return out
    csv.field_size_limit(sys.maxsize)
    with open(full / "redsm5_posts.csv", newline="") as f:
        posts = list(csv.DictReader(f))
    by_length = sorted(posts, key=lambda p: len(p["text"]), reverse=True)
    rest = by_length[40:]
    kept = by_length[:40] + random.Random(0).sample(rest, 40)
    if double_longest:
        kept[0] = {**kept[0], "text": kept[0]["text"] + "\n\n" + kept[0]["text"]}
    ids = {p["post_id"] for p in kept}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "redsm5_posts.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["post_id", "text"])
        writer.writeheader()
        writer.writerows(kept)
    with (
        open(full / "redsm5_annotations.csv", newline="") as f,
        open(out / "redsm5_annotations.csv", "w", newline="") as g,
    ):
        reader = csv.DictReader(f)
        writer = csv.DictWriter(g, fieldnames=reader.fieldnames)
        writer.writeheader()
        writer.writerows(row for row in reader if row["post_id"] in ids)
    return out


def one_trial(code_dir: Path, data_dir: Path, encoder: str, batch: int, max_length: int) -> dict:
    """One trial in a fresh process run from ``code_dir``; its peak RSS, or the cap it crossed."""
    settings = {
        "task": "criteria",
        "encoder": encoder,
        "data_dir": str(data_dir),
        "epochs": 1,
        "max_length": max_length,
        "batch_size": batch,
        "criteria_formulation": "multilabel",
        "long_text": "chunks",
        "class_weighting": "balanced",
        "learning_rate": 1e-4,
        "mixed_precision": "no",
        "cache_dir": str(RUNS / "memory-cache"),
        "split_fractions": [0.8, 0.1, 0.1],
    }
    env = {**os.environ, "PYTHONPATH": str(code_dir), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"}
    proc = subprocess.Popen(
        [sys.executable, "-c", TRIAL, json.dumps(settings)],
        cwd=code_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    crossed = threading.Event()

    def watch():  # kill at the cap: past it the machine's other work would be at risk
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/status") as status:
                    rss = (
                        next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
                        / 1024
                    )
            except (OSError, StopIteration):
                return
            if rss > CAP_MB:
                crossed.set()
                proc.kill()
                return
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, err = proc.communicate()
    watcher.join()
    # our only child: its peak (KiB)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    run = {
        "peak_rss_mb": round(peak, 1),
        "exit_code": proc.returncode,
        "crossed_cap": crossed.is_set(),
    }
    if proc.returncode == 0:
        run |= json.loads(out.strip().splitlines()[-1])
    elif not crossed.is_set():
        run["error"] = (err.strip().splitlines() or ["?"])[-1][:300]
    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="runs of the headline case (after, 16 x 256)"
    )
    parser.add_argument("--other-runs", type=int, default=1, help="runs of every other case")
    parser.add_argument(
        "--only", choices=("before", "after"), nargs="*", default=("before", "after")
    )
    parser.add_argument(
        "--append", action="store_true", help="add to the runs already in bench/results/memory.json"
    )
    parser.add_argument("--single", help=argparse.SUPPRESS)  # internal: one run, JSON on stdout
    args = parser.parse_args()
    if args.single:
        side, batch, max_length, code_dir, data_dir = json.loads(args.single)
        print(
            json.dumps(
                one_trial(Path(code_dir), Path(data_dir), encoder_path()[0], batch, max_length)
            )
        )
        return
    encoder, encoder_name = encoder_path()
    data, doubled = long_tailed_data(), long_tailed_data(double_longest=True)
    before_dir = Path(tempfile.mkdtemp(prefix="hpo-before-"))
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(before_dir), BEFORE_COMMIT],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    plan = [("after", *CASES[0], REPO, data), ("before", *BEFORE_CASES[0], before_dir, data)]
    plan += [("after", batch, length, REPO, data) for batch, length in CASES[1:]]
    plan += [("after x2 longest", 16, 256, REPO, doubled)]
    plan += [("before", batch, length, before_dir, data) for batch, length in BEFORE_CASES[1:]]
    plan = [p for p in plan if p[0].split()[0] in args.only]
    results: dict[str, list[dict]] = {}
    if args.append and (RESULTS / "memory.json").exists():
        results = json.loads((RESULTS / "memory.json").read_text())["runs"]
    try:
        for repeat in range(max(args.runs, args.other_runs)):
            for side, batch, length, code_dir, data_dir in plan:
                headline = (side, batch, length) == ("after", 16, 256)
                if repeat >= (args.runs if headline else args.other_runs):
                    continue
                # A fresh interpreter per run, so RUSAGE_CHILDREN's running maximum is this
                # run's alone.
                done = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "bench.memory",
                        "--single",
                        json.dumps([side, batch, length, str(code_dir), str(data_dir)]),
                    ],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                run = json.loads(done.stdout.strip().splitlines()[-1])
                key = f"{side} batch={batch} max_length={length}"
                results.setdefault(key, []).append(run)
                _write(results)  # after every run: a bench cut short keeps what it measured
                print(
                    f"[run {repeat + 1}] {key}: peak {run['peak_rss_mb']:,.0f} MiB"
                    + (" (crossed the cap, killed)" if run["crossed_cap"] else "")
                    + (
                        f", {run['seconds']:.0f} s, post macro-F1 {run['post_macro_f1']:.3f}"
                        if "seconds" in run
                        else f", exit {run['exit_code']} {run.get('error', '')}"
                    ),
                    flush=True,
                )
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(before_dir)], cwd=REPO, capture_output=True
        )
        shutil.rmtree(before_dir, ignore_errors=True)
    print(f"wrote {_write(results)}")


def _write(results: dict) -> Path:
    workload = {
        "encoder": encoder_path()[1],
        "task": "criteria multilabel, long_text chunks, 1 epoch, float32",
        "data": "realistic sample: the 40 longest of 1,484 generated posts + 40 others (seed 0)",
        "threads": 2,
        "cap_mb": CAP_MB,
        "before_commit": BEFORE_COMMIT,
        "note": "measured while other benchmarks and tests ran on the same 2 cores: seconds "
        "are not comparable between runs; peak RSS is each run's own process",
    }
    target = {"key": "after batch=16 max_length=256", "measure": "peak_rss_mb", "at_most": 2048}
    return write_results("memory", workload, results, "peak_rss_mb", target)


if __name__ == "__main__":
    main()
