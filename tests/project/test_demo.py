"""The README's demos, run as a newcomer runs them: the repository's own Makefile targets."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO


def fresh_clone(root: Path) -> Path:
    """``root`` laid out as a fresh clone after ``make install``: the repository's Makefile,
    studies and pyproject.toml, and a .venv whose bin/ is the one running these tests (its
    ``hpo`` entry point, as the targets call it), installed after pyproject.toml last changed,
    so that no target reinstalls anything. The demos write only under root/_runs."""
    for name in ("Makefile", "studies", "pyproject.toml"):
        (root / name).symlink_to(REPO / name)
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "hpo").exists(), f"{bin_dir} holds no hpo entry point: run make install"
    (root / ".venv").mkdir()
    (root / ".venv" / "bin").symlink_to(bin_dir)
    # the torch stamp `make install` leaves, by the name the Makefile gives it, then the stamp
    # of the install after it
    stamp = subprocess.run(
        ["make", "-s", "--eval", "torch-stamp: ; @echo $(TORCH_STAMP)", "torch-stamp"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (root / stamp).touch()
    (root / ".venv" / ".installed").touch()
    return root


def make(target: str, cwd: Path) -> subprocess.CompletedProcess:
    # the code under test, whichever checkout the venv's editable install points at; and no
    # variables of a `make test` this runs under (MAKEFLAGS passes them on to a sub-make)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("HPO_STORAGE", None)
    return subprocess.run(
        ["make", target], cwd=cwd, env=env, capture_output=True, text=True, timeout=1800
    )


@pytest.mark.slow
def test_make_demo_explain_runs_from_a_fresh_clone(tmp_path):
    # The sample's test split holds no evidence sentence of a symptom: the evidence finalize
    # must score it as support 0 (it once died in scikit-learn on the empty symptom).
    root = fresh_clone(tmp_path)
    run = make("demo-explain", root)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])

    runs = root / "_runs"
    with (runs / "sample-data" / "redsm5_posts.csv").open(newline="") as stream:
        posts = [row["post_id"] for row in csv.DictReader(stream)]
    with (runs / "explain" / "predictions.jsonl").open() as stream:
        assert [json.loads(line)["post_id"] for line in stream] == posts
    assert (runs / "explain" / "report.html").stat().st_size > 0
    for task in ("criteria", "evidence"):
        (final,) = (runs / "studies").glob(f"{task}-explain-demo-*/final")
        summary = json.loads((final / "metrics.json").read_text())
        assert set(summary["test"]["per_symptom"]) == set(summary["test"]["thresholds"])
        assert (
            "### Per symptom (test, at the decision thresholds)"
            in (final / "model_card.md").read_text()
        )
