"""Results files: every published figure comes from one, with every run, the median and the spread,
the machine, the library versions and the commit that produced it."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """CPU model and the flags that decide CPU speed (avx2, avx512_bf16, amx), cores, memory, GPU."""
    info = {"cpu": platform.processor() or platform.machine(), "flags": [], "cores": os.cpu_count()}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        info["cpu"] = next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                           if line.startswith("model name"))
        flags = next(line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags"))
        info["flags"] = sorted(f for f in flags if f in {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
    except (OSError, StopIteration):
        pass
    if hasattr(os, "sched_getaffinity"):
        info["cores"] = len(os.sched_getaffinity(0))
    try:
        info["memory_gb"] = round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1)
    except (ValueError, OSError):
        pass
    try:
        import torch

        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        info["gpu"] = None
    return info


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("torch", "transformers", "optuna", "sqlalchemy"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True, cwd=Path(__file__).resolve().parent).stdout.strip()
    return done.stdout.strip() + ("+uncommitted" if dirty else "")


def write_results(measure: str, workload: dict, runs: dict[str, list[dict]], value: str, target: dict | None = None
                  ) -> Path:
    """``runs``: per case, every run's raw values; ``value`` names the figure whose median and
    spread are summarised per case. ``target``: the case, the figure and its bound, judged met or missed."""
    summary = {}
    for case, case_runs in runs.items():
        values = [run[value] for run in case_runs if value in run]
        summary[case] = {"median": statistics.median(values), "min": min(values), "max": max(values),
                         "runs": len(values)} if values else {"runs": 0}
    result = {"measure": measure, "value": value, "commit": commit(),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
              "versions": versions(), "workload": workload, "runs": runs, "summary": summary}
    if target:
        got = summary.get(target["key"], {}).get("median")
        bound = target.get("at_most")
        result["target"] = {**target, "median": got,
                            "verdict": "met" if got is not None and bound is not None and got <= bound else "missed"}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{measure}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path
