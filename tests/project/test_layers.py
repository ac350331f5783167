"""The layering in pyproject.toml's import-linter contracts holds, and the check can fail:
a copy of the package with one forbidden import is reported broken."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

pytestmark = pytest.mark.skipif(
    not LINT_IMPORTS.exists() and not os.environ.get("CI"),
    reason="needs import-linter: pip install -e '.[dev]'",
)


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the package under root, not the installed one
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        timeout=120,
    )


def test_every_layering_contract_is_kept():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("train/loop.py", "import optuna", "Training never sees Optuna"),
        ("data/tokenize.py", "import hpo.models.loading", "Data and models do not know each other"),
        ("report.py", "import optuna", "One gateway to Optuna"),
        ("study/records/_census.py", "import hpo.cli", "Nothing imports the CLI"),
        ("study/storage/_lock.py", "import hpo.study.records", "The study gateway's rooms"),
        ("study/records/_trials.py", "import hpo.study.search", "The study gateway's rooms"),
        ("cli/status.py", "import hpo.study.records._census", "a room is entered by its face"),
        ("run/worker.py", "import mlflow", "MLflow only through hpo.tracking"),
        ("final/retrain.py", "import hpo.run.worker", "Layers: cli on top"),
        ("run/objective.py", "import hpo.run.worker", "Running a study"),
        ("run/launcher.py", "import hpo.run.tune", "Running a study"),
        ("cli/tune.py", "import hpo.fixtures", "Test and demo fixtures stay out"),
        ("cli/status.py", "import optuna", "One gateway to Optuna"),
        ("final/retrain.py", "import hpo.final.pipeline", "Finalizing"),
        ("final/holdout.py", "import hpo.study", "The test split's only reader"),
        ("storage_url.py", "import optuna", "Specs are plain data"),
        ("spec/_params.py", "import torch", "Specs are plain data"),
        ("spec/_base.py", "import hpo.study", "Layers: cli on top"),
        ("train/config.py", "import hpo.spec", "Layers: cli on top"),
        ("models/inference.py", "import hpo.train.config", "Layers: cli on top"),
        ("vocabulary.py", "import hpo.errors", "The vocabulary is the ground floor"),
        ("vocabulary.py", "import hpo.data", "Layers: cli on top"),
        ("attributes.py", "import optuna", "The attribute keys are a ground floor"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, line, contract):
    shutil.copytree(REPO / "hpo", tmp_path / "hpo", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    path = tmp_path / "hpo" / module
    path.write_text(path.read_text() + f"\n{line}  # deliberate violation\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, result.stdout
