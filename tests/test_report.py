"""``hpo report``: real PNG plots and a Markdown summary from studies on SQLite and PostgreSQL,
with completed, pruned and failed trials made through ask/tell (no training)."""

from __future__ import annotations

import math
import shutil

import matplotlib.image
import optuna
import pytest
from optuna.trial import TrialState

from hpo.cli import main
from hpo.study.storage import get_storage

PLOTS = (
    "optimization_history.png",
    "param_importances.png",
    "intermediate_values.png",
    "parallel_coordinate.png",
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _make_study(url: str, name: str, n_complete: int = 6) -> optuna.Study:
    """``n_complete`` completed trials reporting 3 epochs, 3 pruned after 1 epoch, 1 failed."""
    study = optuna.create_study(
        study_name=name,
        storage=get_storage(url),
        direction="maximize",
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    study.set_user_attr("metric", "macro_f1")
    study.set_user_attr("task", "criteria")
    for index in range(n_complete + 4):
        trial = study.ask()
        lr = trial.suggest_float("learning_rate", 1e-5, 1e-3, log=True)
        layers = trial.suggest_int("head_layers", 0, 2)
        pooling = trial.suggest_categorical("pooling", ["cls", "mean"])
        value = (
            0.5
            + 0.05 * layers
            + (0.03 if pooling == "mean" else 0.0)
            - 0.02 * abs(math.log10(lr) + 4)
        )
        if index == n_complete + 3:
            study.tell(trial, state=TrialState.FAIL)
            continue
        epochs = 3 if index < n_complete else 1
        for epoch in range(1, epochs + 1):
            trial.report(value * epoch / 3, step=epoch)
        trial.set_user_attr("epochs_run", epochs)
        trial.set_user_attr("wall_seconds", 10.0 * epochs + index)
        if index < n_complete:
            study.tell(trial, value)
        else:
            study.tell(trial, state=TrialState.PRUNED)
    return study


@pytest.mark.slow
def test_report_writes_plots_and_summary(storage_url, study_name, tmp_path, capsys):
    study = _make_study(storage_url, study_name)
    out = tmp_path / "report"

    assert main(["report", study_name, "--storage", storage_url, "--out", str(out)]) == 0

    printed = capsys.readouterr().out
    for name in PLOTS:
        path = out / name
        assert str(path) in printed
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC, name
        assert len(data) > 5_000, f"{name} is only {len(data)} bytes"
        height, width = matplotlib.image.imread(path).shape[:2]
        assert height > 100 and width > 100, (name, height, width)
    summary = (out / "summary.md").read_text()
    best = study.best_trial
    assert f"trial {best.number}, macro_f1 = {best.value:.4g}" in summary
    assert "complete 6, pruned 3, failed 1" in summary
    rows = [
        line
        for line in summary.splitlines()
        if line.startswith("| ") and not line.startswith("| trial |")
    ]
    assert len(rows) == 5
    assert rows[0].startswith(f"| {best.number} | {best.value:.4g} |")
    for name in PLOTS:
        assert f"]({name})" in summary


def test_report_accepts_a_spec_file(sqlite_url, tmp_path, monkeypatch):
    """STUDY may be the spec YAML: its name (criteria-smoke) and the storage flag are used."""
    _make_study(sqlite_url, "criteria-smoke")
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "smoke.yaml"
    spec.write_text(
        "name: criteria-smoke\ntask: criteria\ndata_dir: data\nn_trials: 10\n"
        "train: {encoder: tiny}\nsearch_space:\n"
        "  learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}\n"
    )

    assert main(["report", str(spec), "--storage", sqlite_url, "--out", "out"]) == 0
    assert (tmp_path / "out" / "summary.md").read_text().startswith("# Study criteria-smoke\n")


def test_report_with_one_completed_trial_skips_importances(sqlite_url, study_name, tmp_path):
    _make_study(sqlite_url, study_name, n_complete=1)

    assert main(["report", study_name, "--storage", sqlite_url, "--out", str(tmp_path)]) == 0
    assert not (tmp_path / "param_importances.png").exists()
    assert (tmp_path / "optimization_history.png").stat().st_size > 5_000
    assert "parameter importances skipped" in (tmp_path / "summary.md").read_text()


def test_report_without_completed_trials_is_a_usage_error(
    storage_url, study_name, tmp_path, capsys
):
    study = optuna.create_study(study_name=study_name, storage=get_storage(storage_url))
    study.tell(study.ask(), state=TrialState.FAIL)
    pruned = study.ask()
    pruned.report(0.1, step=1)
    study.tell(pruned, state=TrialState.PRUNED)

    assert main(["report", study_name, "--storage", storage_url, "--out", str(tmp_path / "r")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert "no completed trial" in error and study_name in error
    assert not (tmp_path / "r").exists()


def test_report_of_an_unknown_study_names_the_study(sqlite_url, tmp_path, capsys):
    get_storage(sqlite_url)  # creates the empty database
    assert main(["report", "no-such-study", "--storage", sqlite_url, "--out", str(tmp_path)]) == 2
    assert "no study named 'no-such-study'" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["an encoder's folder", "inside a classifier's folder"])
def test_report_refuses_to_write_into_a_model_folder(
    sqlite_url, study_name, tmp_path, capsys, tiny_roberta, where
):
    """A report's PNGs in a model folder travel with every copy of the model (issue #34
    item 14): refused in one line, before anything is written or created."""
    _make_study(sqlite_url, study_name)
    model = shutil.copytree(tiny_roberta, tmp_path / "model")
    if where == "an encoder's folder":
        out, marker = model, "model.safetensors"
    else:
        (model / "classifier.json").write_text("{}")
        out, marker = model / "plots", "classifier.json"
    before = sorted(p.name for p in model.iterdir())

    assert main(["report", study_name, "--storage", sqlite_url, "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    assert f"refusing to write the report into {out}" in error and f"({marker})" in error
    assert "give --out a folder of its own" in error
    assert sorted(p.name for p in model.iterdir()) == before


def test_report_writes_into_a_folder_holding_other_files(sqlite_url, study_name, tmp_path):
    """Only model folders are refused: a shared folder (here beside the study's database) or a
    previous report's folder takes the report."""
    _make_study(sqlite_url, study_name)
    for _ in range(2):
        assert main(["report", study_name, "--storage", sqlite_url, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "summary.md").exists() and (tmp_path / "hpo.db").exists()


@pytest.mark.parametrize("flag", ["--out", "--storage"])
def test_report_help_lists_its_flags(flag, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--help"])
    assert exit_info.value.code == 0
    assert flag in capsys.readouterr().out
