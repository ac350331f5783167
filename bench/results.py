"""Results files: every published figure comes from one, with every run, the median and the spread,
the machine, the library versions and the commit that produced it."""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """CPU model and the flags that decide CPU speed (avx2, avx512_bf16, amx), cores, memory,
    GPU."""
    info = {"cpu": platform.processor() or platform.machine(), "flags": [], "cores": os.cpu_count()}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        info["cpu"] = next(
            line.split(":", 1)[1].strip()
            for line in cpuinfo.splitlines()
            if line.startswith("model name")
        )
        flags = next(
            line.split(":", 1)[1].split()
            for line in cpuinfo.splitlines()
            if line.startswith("flags")
        )
        info["flags"] = sorted(
            f for f in flags if f in {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}
        )
    except (OSError, StopIteration):
        pass
    if hasattr(os, "sched_getaffinity"):
        info["cores"] = len(os.sched_getaffinity(0))
    try:
        info["memory_gb"] = round(
            os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1
        )
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
    for name in ("hpo", "torch", "transformers", "optuna", "sqlalchemy", "numpy"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def commit(checkout: Path | None = None) -> str:
    """The commit of this checkout (or ``checkout``), "+uncommitted" where its code has changes:
    a results file rewritten under bench/results (this very write's earlier version) is output,
    not code, and does not count."""
    where = checkout or Path(__file__).resolve().parent
    try:  # a lent machine's copy of the tree may have no git, or no repository
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=where
        )
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ":(top)",
                ":(top,exclude)bench/results",
            ],
            capture_output=True,
            text=True,
            cwd=where,
        ).stdout.strip()
    except OSError:
        return os.environ.get("HPO_COMMIT", "unknown")
    if done.returncode != 0:
        return os.environ.get("HPO_COMMIT", "unknown")
    return done.stdout.strip() + ("+uncommitted" if dirty else "")


def stats(values: list) -> dict:
    """Median, min, max and spread ((max - min) / median) of one case's runs. A run without a
    figure (None: a target never reached) counts as worse than any, so it is never dropped."""
    if not values:
        return {"runs": 0}
    numbers = [math.inf if v is None else v for v in values]
    median = statistics.median(numbers)
    finite = [v for v in numbers if math.isfinite(v)]
    spread = (
        (max(numbers) - min(numbers)) / median
        if finite and math.isfinite(max(numbers)) and median
        else None
    )
    return {
        "median": _finite(median),
        "min": _finite(min(numbers)),
        "max": _finite(max(numbers)),
        "spread": None if spread is None else round(spread, 4),
        "runs": len(values),
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def mean_interval(values: list[float], seed: int = 0, n: int = 2000) -> list[float]:
    """95% percentile bootstrap interval of the mean of ``values`` (a measure's repeats, or
    their paired differences)."""
    rng = np.random.default_rng(seed)
    means = rng.choice(np.asarray(values, dtype=float), size=(n, len(values))).mean(axis=1)
    return [round(float(x), 4) for x in np.percentile(means, [2.5, 97.5])]


# What else ran on the machine while a measure ran: set by ``python -m bench.run --machine-use``.
MACHINE_USE = {
    "text": "a shared 2-core machine: other engineers' tests ran at the same time, so absolute "
    "seconds are inflated and spread; ratios come from runs alternated within one round"
}


def write_results(
    measure: str,
    workload: dict,
    runs: dict[str, list[dict]],
    value: str,
    target: dict | None = None,
    *,
    definition: str | None = None,
    also: tuple[str, ...] = (),
    details: dict | None = None,
    command: str | None = None,
    fewer_runs: dict | None = None,
    data_dir: str | Path | None = None,
) -> Path:
    """``runs``: per case, every run's raw values; ``value`` names the figure whose median and
    spread are summarised per case (``also``: more figures summarised the same way, under
    ``figures``). ``target``: the case (``key``), the figure and its bound (``at_most``,
    ``at_least`` or ``within`` [low, high]), judged met or missed on the median.
    ``definition``: the measure's one definition, in words; ``details``: figures measured once
    (a profile), not per run.
    ``fewer_runs``: ``{at_least, why}`` for a measure whose issue asked fewer than five runs.
    ``data_dir``: the ReDSM5-format files it read; their digest goes in the workload, so a reader
    tells figures on the real ReDSM5 from figures on generated data."""
    summary = {
        case: stats([run.get(value) for run in case_runs if value in run])
        for case, case_runs in runs.items()
    }
    figures = {
        name: {
            case: stats([run.get(name) for run in case_runs if name in run])
            for case, case_runs in runs.items()
        }
        for name in (value, *also)
    }
    result = {
        "measure": measure,
        "value": value,
        "definition": definition,
        "command": command,
        "commit": commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "workload": {
            **workload,
            **(data_identity(data_dir) if data_dir else {}),
            "machine_use": MACHINE_USE["text"],
            "load_average_1_5_15_min_when_written": [round(x, 2) for x in os.getloadavg()],
        },
        "runs": runs,
        "summary": summary,
        "figures": figures,
    }
    if details:
        result["details"] = details
    if fewer_runs:
        result["fewer_runs"] = fewer_runs
    if target:
        got = summary.get(target["key"], {})
        result["target"] = {
            **target,
            "median": got.get("median"),
            "verdict": verdict(got.get("median"), target, got.get("runs", 0)),
        }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{measure}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


# The real ReDSM5's digest (hpo.data.redsm5.files_fingerprint of the two files in
# ../shared/redsm5, whose sha256 its README lists): the one data a figure can be "real" on.
REAL_REDSM5 = "3b8cd51ef02a5704f576a9c632fdfa1105afdd050a8d28532bd7107cdfcf1af9"


def data_identity(data_dir: str | Path) -> dict:
    """The data's digest and what it is: the real ReDSM5, or other files (generated ones)."""
    from hpo.data.redsm5 import files_fingerprint

    fingerprint = files_fingerprint(data_dir)
    kind = "real ReDSM5" if fingerprint == REAL_REDSM5 else "generated or other data"
    return {"data_fingerprint": fingerprint, "data_kind": kind}


def verdict(median: float | None, target: dict, runs: int = 1) -> str:
    """met or missed: a median that does not exist (never reached) misses; no run with the
    figure at all (it could not be taken on this workload) is "not measured"."""
    if not runs:
        return "not measured"
    if median is None:
        return "missed"
    if "at_most" in target:
        return "met" if median <= target["at_most"] else "missed"
    if "at_least" in target:
        return "met" if median >= target["at_least"] else "missed"
    if "within" in target:  # a range to land in: the calibration's real-job band
        low, high = target["within"]
        return "met" if low <= median <= high else "missed"
    return "measured"


def load_all() -> dict[str, dict]:
    """Every results file, by measure."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(RESULTS.glob("*.json"))}
