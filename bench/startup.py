"""Start-up: `hpo tune --workers 2` launched to its first trial RUNNING, against the import floor
(`python -c "import torch, transformers, optuna"`), alternated in each round.

    python -m bench.run --only startup
    python -m bench.startup --profile      # where the seconds go: py-spy over every process
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import optuna

from bench.common import REPO, RUNS, hpo_cmd, timed_run, write_spec
from bench.results import RESULTS, commit, write_results

WORKERS = 2  # as in make demo
FLOOR = [sys.executable, "-c", "import torch, transformers, optuna"]
STORAGE = f"sqlite:///{RUNS / 'startup.db'}"


def _spec(name: str, encoder: str, data_dir: str) -> str:
    return str(
        write_spec(
            name,
            task="criteria",
            data_dir=data_dir,
            n_trials=WORKERS,
            keep_top_k=0,
            storage=STORAGE,
            output_dir=str(RUNS / "studies"),
            sampler={"name": "random", "seed": 0},
            pruner={"name": "none"},
            train={
                "encoder": encoder,
                "epochs": 1,
                "max_length": 128,
                "criteria_formulation": "multilabel",
                "cache_dir": str(RUNS / "startup-cache"),
            },
            search_space={
                "learning_rate": {"type": "float", "low": 2e-5, "high": 2e-4, "log": True}
            },
        )
    )


def first_running(name: str, spec: str) -> float:
    """Seconds from launching `hpo tune` to its first trial's start (the trial turning RUNNING)."""
    launched = time.time()
    timed_run(hpo_cmd("tune", spec, "--workers", str(WORKERS), "--no-progress"))
    first = min(
        optuna.load_study(study_name=name, storage=STORAGE).trials, key=lambda t: t.datetime_start
    )
    return first.datetime_start.timestamp() - launched


def startup(encoder: str, encoder_name: str, data_dir: str, data: str, runs: int) -> None:
    (RUNS / "startup.db").unlink(missing_ok=True)
    shutil.rmtree(RUNS / "startup-cache", ignore_errors=True)
    rounds = []
    for round_no in range(runs):
        name = f"startup-{round_no}"
        spec = _spec(name, encoder, data_dir)
        got = {}
        for side in ("floor", "tune") if round_no % 2 == 0 else ("tune", "floor"):
            got[side] = timed_run(FLOOR)[0] if side == "floor" else first_running(name, spec)
        rounds.append(
            {
                "first_trial_running_s": got["tune"],
                "import_floor_s": got["floor"],
                "over_floor_s": got["tune"] - got["floor"],
            }
        )
        print(
            f"[startup round {round_no + 1}] {got['tune']:.1f} s vs floor {got['floor']:.1f} s",
            flush=True,
        )
    previous = RESULTS / "startup.json"
    details = json.loads(previous.read_text()).get("details") if previous.exists() else None
    write_results(
        "startup",
        {
            "encoder": encoder_name,
            "data": data,
            "workers": WORKERS,
            "rounds": "the two sides alternate in each round",
            "study": "criteria multilabel, 2 trials, 1 epoch, SQLite storage, tokenization "
            "cache kept between rounds (after the first), as on a user's second run",
        },
        {"hpo tune --workers 2": rounds},
        "over_floor_s",
        {"key": "hpo tune --workers 2", "at_most": 1.5},
        definition="seconds from launching hpo tune --workers 2 to its first trial RUNNING, "
        "minus the seconds of python -c 'import torch, transformers, optuna' in the same round",
        also=("first_trial_running_s", "import_floor_s"),
        details=details,
        command="python -m bench.run --only startup",
    )


def profile(encoder: str, data_dir: str) -> dict:
    """One `hpo tune --workers 2` under py-spy (every process, 50 samples/s, busy threads only):
    per process and phase, the seconds of samples until the run ended. Stored as startup.json's
    details."""
    name = f"startup-profile-{time.strftime('%H%M%S')}"
    spec = _spec(name, encoder, data_dir)
    out = RUNS / "startup-profile.txt"
    subprocess.run(
        [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--subprocesses",
            "--rate",
            "50",
            "--format",
            "raw",
            "--output",
            str(out),
            "--",
            *hpo_cmd("tune", spec, "--workers", str(WORKERS), "--no-progress"),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    return {
        "profile_process_seconds": phase_seconds(out),
        "profile": "py-spy record --subprocesses --rate 50 over one hpo tune --workers 2 "
        f"of this study (busy samples only; commit {commit()})",
    }


def phase_seconds(raw: Path, rate: int = 50) -> dict[str, float]:
    """Seconds of samples per process and phase, from py-spy's raw (collapsed stack) output."""
    seconds = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if ";" in stack:
            seconds[_phase(stack)] += int(count) / rate
    return {phase: round(s, 1) for phase, s in seconds.most_common() if s >= 0.2}


# The first of these hpo functions found in a stack names its phase (imports are named first).
MARKERS = (
    ("preflight", "launcher checks (preflight)"),
    ("open_study", "study creation"),
    ("build_classifier", "trial: model load"),
    ("prepare_data", "trial: data"),
    ("hpo/train/loop.py", "trial: training and evaluation"),
    ("hpo/train/setup.py", "trial: training and evaluation"),
    ("load_spec", "spec"),
    ("Supervisor", "supervising workers"),
)


def _phase(stack: str) -> str:
    """'launcher' or 'worker', then the package a top-level import was loading, or the hpo phase."""
    frames = stack.split(";")
    heads = [
        f for f in frames if f.startswith("process ")
    ]  # a child's stack is nested in its parent's
    process = (
        "launcher"
        if " tune " in heads[-1]
        else "worker"
        if " worker " in heads[-1]
        else "other process"
    )
    frames = frames[frames.index(heads[-1]) + 1 :]
    for frame in frames:
        imported = re.match(r"<module> \((\w+)/", frame)
        if imported and imported.group(1) != "hpo":
            return f"{process}: import {imported.group(1)} (and what it imports)"
    for marker, phase in MARKERS:
        if marker in stack:
            return f"{process}: {phase}"
    return f"{process}: other"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--profile", action="store_true", help="profile one run; store it in startup.json"
    )
    args = parser.parse_args()
    if args.profile:
        from bench.common import encoder_path, sample_data
        from bench.run import POSTS

        result = profile(encoder_path()[0], sample_data(f"data-{POSTS}", POSTS))
        path = RESULTS / "startup.json"
        stored = json.loads(path.read_text())
        stored["details"] = result
        path.write_text(json.dumps(stored, indent=2) + "\n")
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
