"""Start-up: from `hpo tune` to the first trial running and to its first optimizer step, with
the parts measured alone (each in a fresh process, one after the other).

    python -m bench.run --only startup
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import optuna

from bench.common import REPO, RUNS, hpo_cmd, write_spec

WORKERS = 2  # as in make demo


def startup(encoder: str, data_dir: str) -> dict:
    name = f"startup-{time.strftime('%H%M%S')}"
    storage = f"sqlite:///{RUNS / 'startup.db'}"
    spec = write_spec(name, task="criteria", data_dir=data_dir, n_trials=WORKERS, keep_top_k=0, storage=storage,
                      output_dir=str(RUNS / "studies"), sampler={"name": "random", "seed": 0},
                      pruner={"name": "none"}, train={"encoder": encoder, "epochs": 1, "max_length": 128,
                                                      "criteria_formulation": "multilabel",
                                                      "cache_dir": str(RUNS / "startup-cache")},
                      search_space={"learning_rate": {"type": "float", "low": 2e-5, "high": 2e-4, "log": True}})
    started = time.time()
    proc = subprocess.Popen(hpo_cmd("tune", str(spec), "--workers", str(WORKERS), "--no-progress"), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    study_ready = None
    for line in proc.stdout:
        if study_ready is None and line.startswith(f"study '{name}'"):  # printed right after the study exists
            study_ready = time.time() - started
    if proc.wait() != 0:
        raise RuntimeError(f"hpo tune {spec} failed ({proc.returncode})")
    first = min(optuna.load_study(study_name=name, storage=storage).trials, key=lambda t: t.datetime_start)
    first_running = first.datetime_start.timestamp() - started
    parts = {
        "worker imports (hpo.worker: torch, transformers, sklearn, optuna)": _seconds("import hpo.worker"),
        "launcher checks (preflight: data, split, tokenizers, devices)": _seconds(
            "from hpo.spec import load_spec; from hpo.preflight import preflight; "
            f"preflight(load_spec({str(spec)!r}))"),
    }
    return {"first_trial_running_seconds": first_running, "study_created_seconds": study_ready,
            "first_step_seconds": first_running + first.user_attrs["setup_seconds"],
            "first_trial_setup_seconds": first.user_attrs["setup_seconds"], "parts_alone": parts,
            "workers": WORKERS, "command": "python -m bench.run --only startup"}


def _seconds(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return time.perf_counter() - started
