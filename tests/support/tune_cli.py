"""`hpo tune` run as a user runs it, on the sample data and the tiny encoders: shared by the
tests that read its output (tests/run/test_tune.py, tests/run/test_summary.py and more)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hpo.fixtures import write_sample
from hpo.spec import set_flags
from tests.support import REPO
from tests.support.helpers import hpo_argv


def tune_assets(
    root: Path, tiny_roberta: Path, tiny_deberta: Path, posts: int = 120, seed: int = 1
) -> dict:
    """Sample data (``posts`` posts of ``seed``) and the two tiny encoders, under ``root``."""
    return {
        "data": write_sample(root / "data", posts=posts, seed=seed),
        "root": root,
        "roberta": tiny_roberta,
        "deberta": tiny_deberta,
    }


def study_sets(name: str, assets: dict, output_dir: Path | None = None) -> list[str]:
    """The overrides that point a shipped spec at ``assets``: the study's name, the sample
    data, an output folder of its own (``output_dir``, default under the assets' root), a
    shared tokenization cache and the tiny encoders."""
    return [
        f"name={name}",
        f"data_dir={assets['data']}",
        f"output_dir={output_dir or assets['root'] / name}",
        f"train.cache_dir={assets['root'] / 'cache'}",
        f"model_paths.tiny-roberta={assets['roberta']}",
        f"model_paths.tiny-deberta={assets['deberta']}",
    ]


def run_tune(
    spec: str, name: str, storage: str, assets: dict, workers: int, *extra: str
) -> subprocess.CompletedProcess:
    """``hpo tune studies/SPEC`` with ``workers`` workers, logs only; ``extra``: more flags."""
    cmd = [
        *hpo_argv("tune", str(REPO / "studies" / spec)),
        *("--workers", str(workers), "--storage", storage, "--no-progress"),
        *set_flags(study_sets(name, assets)),
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=assets["root"])
