"""hpo.tune and hpo.finalize: the main job from Python, through the same processes and checks
as the commands, on a real SQLite study and tiny encoders saved with save_pretrained."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import hpo
from hpo.errors import UsageError
from hpo.fixtures import write_sample

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "studies" / "criteria-smoke.yaml")


def _sets(name: str, root: Path, roberta: Path, deberta: Path) -> list[str]:
    return [
        f"name={name}",
        f"data_dir={write_sample(root / 'data', posts=40, seed=0)}",
        f"output_dir={root / name}",
        f"train.cache_dir={root / 'cache'}",
        f"model_paths.tiny-roberta={roberta}",
        f"model_paths.tiny-deberta={deberta}",
        "n_trials=2",
        "train.epochs=1",
        "keep_top_k=0",
    ]


def test_importing_hpo_loads_no_torch_and_names_the_api():
    import subprocess
    import sys

    loaded = subprocess.run(
        [sys.executable, "-c", "import hpo, sys; hpo.tune; print('torch' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == "False"
    with pytest.raises(AttributeError, match="no attribute 'tuen'"):
        hpo.tuen  # noqa: B018


def test_the_api_stays_callable_after_every_submodule_is_imported():
    # importing a subpackage binds its name on ``hpo``: one named ``finalize`` hid the function
    import importlib
    import pkgutil

    for module in pkgutil.walk_packages(hpo.__path__, "hpo."):
        if module.name != "hpo.__main__":  # that one runs the command line
            importlib.import_module(module.name)
    assert callable(hpo.tune) and callable(hpo.finalize)


@pytest.mark.slow
def test_tune_then_finalize_by_the_studys_name(tmp_path, tiny_roberta, tiny_deberta, study_name):
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    sets = _sets(study_name, tmp_path, tiny_roberta, tiny_deberta)
    study = hpo.tune(SMOKE, workers=1, overrides=sets, storage=storage)
    finished = [t for t in study.trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert study.study_name == study_name and len(finished) == 2
    summary = hpo.finalize(study_name, top_k=1, seeds=1, storage=storage, threads=1)
    # one worker retrains in this process, at the threads asked for (issue #48 item 2)
    assert torch.get_num_threads() == 1
    assert summary["chosen"]["trial"] in {t.number for t in finished}
    assert 0.0 <= summary["test"]["metrics"]["macro_f1"] <= 1.0
    assert [p for p in (tmp_path / study_name).glob("*/final/model") if p.is_dir()], "final/model"


def test_bad_input_raises_the_commands_one_line_usage_error(tmp_path):
    with pytest.raises(UsageError) as refused:
        hpo.tune(str(tmp_path / "missing.yaml"), storage=f"sqlite:///{tmp_path / 'hpo.db'}")
    assert "\n" not in str(refused.value) and "missing.yaml" in str(refused.value)
    assert not (tmp_path / "hpo.db").exists() or (tmp_path / "hpo.db").stat().st_size == 0
