"""Start-up: `hpo tune --workers 2` launched to its first trial RUNNING, against the import floor
(`python -c "import torch, transformers, optuna"`), alternated in each round. Beside it, the
training floor: that floor plus the model classes and metrics any process that trains must import
(`transformers` imports its modeling stack lazily, so the import floor leaves it out).

    python -m bench.run --only startup
    python -m bench.run --only startup --profile    # where the seconds go: py-spy, every process
"""

from __future__ import annotations

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
from bench.workload import encoder_path, small_sample

NAME = "startup"
DEFINITION = (
    "seconds from launching hpo tune --workers 2 to its first trial RUNNING, minus the seconds "
    "of python -c 'import torch, transformers, optuna' in the same round"
)
WORKERS = 2  # as in make demo
FLOOR = [sys.executable, "-c", "import torch, transformers, optuna"]
TRAINING_FLOOR = [
    sys.executable,
    "-c",
    "import torch, transformers, optuna, sklearn.metrics; "
    "from transformers import AutoModel, AutoTokenizer, PreTrainedModel",
]
STORAGE = f"sqlite:///{RUNS / 'startup.db'}"


def _spec(name: str, encoder: str, data_dir: str, cache: str = "startup-cache") -> str:
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
                "cache_dir": str(RUNS / cache),
            },
            search_space={
                "learning_rate": {"type": "float", "low": 2e-5, "high": 2e-4, "log": True}
            },
        )
    )


def first_running(name: str, spec: str, checkout: Path = REPO) -> float:
    """Seconds from launching `hpo tune` (the code in ``checkout``) to its first trial's start
    (the trial turning RUNNING)."""
    launched = time.time()
    timed_run(hpo_cmd("tune", spec, "--workers", str(WORKERS), "--no-progress"), cwd=checkout)
    first = min(
        optuna.load_study(study_name=name, storage=STORAGE).trials, key=lambda t: t.datetime_start
    )
    return first.datetime_start.timestamp() - launched


def baseline_checkout(ref: str) -> tuple[Path, str]:
    """A git worktree of ``ref`` under _runs/bench (made once), and its short commit."""
    short = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    path = RUNS / f"baseline-{short}"
    if not path.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), short], cwd=REPO, check=True
        )
    return path, short


def measure(args) -> None:
    """``args.runs`` rounds of the sides in a rotating order; keeps startup.json's profile.
    ``args.profile``: one profiled run instead, stored as startup.json's details."""
    encoder, encoder_name = encoder_path()
    data_dir, data = small_sample(args.data_dir)
    if args.profile:
        store_profile(profile(encoder, data_dir))
        return
    (RUNS / "startup.db").unlink(missing_ok=True)
    shutil.rmtree(RUNS / "startup-cache", ignore_errors=True)
    shutil.rmtree(RUNS / "startup-cache-baseline", ignore_errors=True)
    baseline = baseline_checkout(args.baseline) if args.baseline else None
    rounds = []
    for round_no in range(args.runs):
        name = f"startup-{round_no}"
        spec = _spec(name, encoder, data_dir)
        sides = {
            "floor": lambda: timed_run(FLOOR)[0],
            "training": lambda: timed_run(TRAINING_FLOOR)[0],
            "tune": lambda: first_running(name, spec),  # noqa: B023 (called in this round)
        }
        if baseline:  # the same study at the baseline's commit, its own name and cache
            before = f"{name}-baseline"
            before_spec = _spec(before, encoder, data_dir, cache="startup-cache-baseline")
            sides["baseline"] = lambda: first_running(before, before_spec, baseline[0])  # noqa: B023
        shift = round_no % len(sides)
        order = list(sides)[shift:] + list(sides)[:shift]  # rotating
        got = {side: sides[side]() for side in order}
        rounds.append(
            {
                "first_trial_running_s": got["tune"],
                "import_floor_s": got["floor"],
                "over_floor_s": got["tune"] - got["floor"],
                "training_floor_s": got["training"],
                "over_training_floor_s": got["tune"] - got["training"],
            }
            | (
                {
                    "baseline_first_trial_running_s": got["baseline"],
                    "baseline_over_floor_s": got["baseline"] - got["floor"],
                    "saved_s": got["baseline"] - got["tune"],
                }
                if baseline
                else {}
            )
        )
        print(
            f"[startup round {round_no + 1}] {got['tune']:.1f} s vs floor {got['floor']:.1f} s, "
            f"training floor {got['training']:.1f} s"
            + (f", baseline {got['baseline']:.1f} s" if baseline else ""),
            flush=True,
        )
    previous = RESULTS / "startup.json"
    details = json.loads(previous.read_text()).get("details") if previous.exists() else None
    write_results(
        NAME,
        {
            "encoder": encoder_name,
            "data": data,
            "workers": WORKERS,
            "rounds": "the sides (floor, training floor, hpo tune, and with --baseline hpo tune "
            "at that commit from its own worktree and cache) in a rotating order",
            "baseline": baseline[1] if baseline else None,
            "training_floor": " ".join(TRAINING_FLOOR[1:]),
            "study": "criteria multilabel, 2 trials, 1 epoch, SQLite storage, tokenization "
            "cache and preflight receipt kept between rounds (the first round is a first run), "
            "as on a user's second run",
        },
        {"hpo tune --workers 2": rounds},
        "over_floor_s",
        {"key": "hpo tune --workers 2", "at_most": 1.5},
        definition=DEFINITION,
        also=(
            "first_trial_running_s",
            "import_floor_s",
            "training_floor_s",
            "over_training_floor_s",
            *(
                ("baseline_first_trial_running_s", "baseline_over_floor_s", "saved_s")
                * bool(baseline)
            ),
        ),
        details=details,
        command="python -m bench.run --only startup"
        + (f" --runs {args.runs} --baseline {baseline[1]}" if baseline else ""),
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


def store_profile(result: dict) -> None:
    """``result`` as startup.json's details, the rest of the file as it was."""
    path = RESULTS / "startup.json"
    stored = json.loads(path.read_text())
    stored["details"] = result
    path.write_text(json.dumps(stored, indent=2) + "\n")
    print(json.dumps(result, indent=2))
