"""``hpo best``: the best trial's parameters, metrics and checkpoint, shown only when the
checkpoint is this study's own; and Optuna's own CLI reading the same study."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from hpo.fixtures import write_sample
from hpo.run.worker import run_worker
from hpo.spec import load_spec
from hpo.study.storage import get_storage
from tests.support import REPO
from tests.support.cli_studies import BEST, SPACE
from tests.support.helpers import hpo
from tests.support.shared_storage import read_study

OPTUNA = Path(sys.executable).parent / "optuna"


def test_best_prints_params_metrics_and_checkpoint(capsys, finished, postgres_url, tmp_path):
    code, out, err = hpo(capsys, "best", finished.study_name, "--storage", postgres_url)
    assert code == 0, err
    best = finished.best_trial
    assert best.number == BEST
    lines = out.splitlines()
    assert lines[0] == f"best trial {BEST}: macro_f1 = 0.8700"
    assert lines[1] == "  params: " + ", ".join(f"{k}={v}" for k, v in best.params.items())
    assert set(best.params) == set(SPACE)
    assert lines[2] == "  metrics: macro_f1=0.8700, accuracy=0.9100"
    assert lines[3] == f"  checkpoint: {best_folder(finished) / 'checkpoint'}"


def best_folder(study: optuna.Study) -> Path:
    return Path(study.best_trial.user_attrs["checkpoint"]).parent


def test_best_leaves_out_a_checkpoint_that_no_longer_exists(
    capsys, finished, postgres_url, tmp_path
):
    (best_folder(finished) / "checkpoint").rmdir()  # pruned away by keep_top_k, or moved
    code, out, _ = hpo(capsys, "best", finished.study_name, "--storage", postgres_url)
    assert code == 0
    assert "best trial 1" in out and "checkpoint" not in out


def record_best_metrics(study: optuna.Study, recorded: dict | None) -> Path:
    """Replace (None: remove) the best trial's metrics.json; returns its checkpoint."""
    metrics = best_folder(study) / "metrics.json"
    if recorded is None:
        metrics.unlink()
    else:
        metrics.write_text(json.dumps(recorded))
    return best_folder(study) / "checkpoint"


def best_refusal(capsys, study: optuna.Study, url: str) -> str:
    """The line ``hpo best`` prints where the checkpoint line would be; there must be no checkpoint
    line."""
    code, out, _ = hpo(capsys, "best", study.study_name, "--storage", url)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 4 and "  checkpoint:" not in out, out
    return lines[3]


def test_best_refuses_a_checkpoint_whose_metrics_name_another_study(capsys, finished, postgres_url):
    # as a same-named study on another storage, sharing the output_dir, would leave the folder
    checkpoint = record_best_metrics(
        finished, {"value": 0.99, "study_uid": "feedbeef" * 4, "trial": BEST}
    )
    assert best_refusal(capsys, finished, postgres_url) == (
        f"  the checkpoint at {checkpoint} belongs to another study "
        "(its metrics.json names study feedbeef); not shown"
    )


@pytest.mark.parametrize(
    "recorded", [None, {"value": 0.87}], ids=["no metrics.json", "metrics.json without uid"]
)
def test_best_refuses_a_checkpoint_not_recorded_as_its_studys(
    capsys, finished, postgres_url, recorded
):
    checkpoint = record_best_metrics(finished, recorded)
    assert best_refusal(capsys, finished, postgres_url) == (
        f"  the checkpoint at {checkpoint} is not recorded as this study's "
        "(no study uid in its metrics.json); "
        "not shown"
    )


def test_best_refuses_another_trials_checkpoint(capsys, finished, postgres_url):
    checkpoint = record_best_metrics(
        finished, {"study_uid": finished.user_attrs["uid"], "trial": BEST + 2}
    )
    assert best_refusal(capsys, finished, postgres_url) == (
        f"  the checkpoint at {checkpoint} belongs to trial {BEST + 2}, not trial {BEST}; not shown"
    )


@pytest.mark.slow
def test_same_named_studies_sharing_an_output_dir_keep_apart_and_best_shows_its_own(
    capsys, tmp_path, study_name, tiny_roberta, tiny_deberta
):
    """Two studies of one name on two storages (or one deleted and re-created) write to one
    output_dir: each keeps its own trial folders, and ``best`` names its own checkpoint."""
    data, shared = write_sample(tmp_path / "data", posts=30, seed=0), tmp_path / "out"
    runs = []
    for storage in ("first", "second"):
        url = f"sqlite:///{tmp_path / storage}.db"
        spec = load_spec(
            REPO / "studies" / "evidence-smoke.yaml",
            [
                f"name={study_name}",
                f"data_dir={data}",
                f"output_dir={shared}",
                "n_trials=2",
                "train.epochs=1",
                "keep_top_k=2",
                f"train.cache_dir={tmp_path / 'cache'}",
                f"model_paths.tiny-roberta={tiny_roberta}",
                f"model_paths.tiny-deberta={tiny_deberta}",
            ],
            url,
            env={},
        )
        assert run_worker(spec, poll_seconds=0.1) == 2
        runs.append((url, spec))
    folders = []
    for url, spec in runs:
        study = read_study(study_name, url)
        folder = spec.study_dir(study.user_attrs["uid"])
        for trial in study.trials:  # the second study wrote trials 0 and 1 too, elsewhere
            recorded = json.loads((folder / f"trial_{trial.number}" / "metrics.json").read_text())
            assert (recorded["study_uid"], recorded["trial"]) == (
                study.user_attrs["uid"],
                trial.number,
            )
        code, out, err = hpo(capsys, "best", study_name, "--storage", url)
        assert code == 0, err
        assert (
            out.splitlines()[3]
            == f"  checkpoint: {folder / f'trial_{study.best_trial.number}' / 'checkpoint'}"
        )
        folders.append(folder)
    assert folders[0] != folders[1]
    assert sorted(p.name for p in shared.iterdir()) == sorted(
        ["artifacts", *(f.name for f in folders)]
    )


def test_best_of_a_study_without_completed_trials(capsys, sqlite_url, study_name):
    study = optuna.create_study(study_name=study_name, storage=get_storage(sqlite_url))
    study.tell(study.ask(SPACE), state=TrialState.PRUNED)
    code, out, _ = hpo(capsys, "best", study_name, "--storage", sqlite_url)
    assert code == 0
    assert out.strip() == f"study {study_name} has no completed trial yet"


# ---- Optuna's own tools read our studies ---------------------------------------------------------


def test_optuna_cli_reads_the_best_trial(finished, postgres_url):
    result = subprocess.run(
        [
            str(OPTUNA),
            "best-trial",
            "--study-name",
            finished.study_name,
            "--storage",
            postgres_url,
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    best = json.loads(result.stdout)
    assert best["number"] == BEST
    assert best["value"] == pytest.approx(0.87)
