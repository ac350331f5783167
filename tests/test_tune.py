"""End to end: the real CLI starts worker processes on one real PostgreSQL study."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.artifacts import get_all_artifact_meta
from optuna.trial import TrialState
from shared_storage import read_study

from hpo.fixtures import write_sample
from hpo.outputs import study_dir

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta):
    root = tmp_path_factory.mktemp("tune")
    return {
        "data": write_sample(root / "data", posts=120, seed=1),
        "root": root,
        "roberta": tiny_roberta,
        "deberta": tiny_deberta,
    }


def _tune(
    spec: str, name: str, storage: str, assets, workers: int, *extra: str
) -> subprocess.CompletedProcess:
    out = assets["root"] / name
    cmd = [
        sys.executable,
        "-m",
        "hpo",
        "tune",
        str(REPO / "studies" / spec),
        "--workers",
        str(workers),
        "--storage",
        storage,
        "--no-progress",
        "--set",
        f"name={name}",
        "--set",
        f"data_dir={assets['data']}",
        "--set",
        f"output_dir={out}",
        "--set",
        f"train.cache_dir={assets['root'] / 'cache'}",
        "--set",
        f"model_paths.tiny-roberta={assets['roberta']}",
        "--set",
        f"model_paths.tiny-deberta={assets['deberta']}",
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=assets["root"])


def _finished(study: optuna.Study) -> list:
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


@pytest.mark.parametrize("task", ["criteria", "evidence"])
def test_smoke_study_with_two_workers_on_postgres(task, postgres_url, study_name, assets):
    run = _tune(f"{task}-smoke.yaml", study_name, postgres_url, assets, 2)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    study = read_study(study_name, postgres_url)
    finished = _finished(study)
    assert len(finished) == 6, [t.state for t in study.trials]
    # one-class answers score <= 0.46 here
    assert study.best_value > 0.5, "best macro-F1 must beat chance"
    assert len({t.user_attrs["worker"] for t in finished}) == 2, "both workers ran trials"
    assert {t.number for t in finished} == set(range(len(study.trials))) - {
        t.number for t in study.trials if t.state == TrialState.FAIL
    }
    best = study.best_trial
    assert {
        "metrics",
        "epochs_run",
        "micro_batch_size",
        "wall_seconds",
        "train_samples_per_second",
        "peak_memory_mb",
    } <= set(best.user_attrs)
    folder = study_dir(assets["root"] / study_name, study_name, study.user_attrs["uid"])
    for trial in finished:
        assert (folder / f"trial_{trial.number}" / "train.log").exists()
    # Only the top-k (3) checkpoints stay on disk, each uploaded as an artifact.
    kept = sorted(p.parent.name for p in folder.glob("trial_*/checkpoint"))
    complete = sorted(study.get_trials(states=(TrialState.COMPLETE,)), key=lambda t: -t.value)
    assert kept == sorted(f"trial_{t.number}" for t in complete[:3])
    for trial in complete:  # each trial's metrics name the study and trial they belong to
        recorded = json.loads((folder / f"trial_{trial.number}" / "metrics.json").read_text())
        assert (recorded["study_uid"], recorded["trial"]) == (study.user_attrs["uid"], trial.number)
    for trial in complete[:3]:
        names = {m.filename for m in get_all_artifact_meta(trial, storage=study._storage)}
        assert {"checkpoint.tar", "metrics.json"} <= names
    assert "best trial" in run.stdout


def test_three_workers_end_at_exactly_n_trials(postgres_url, study_name, assets):
    from hpo.run.launcher import available_cpus

    run = _tune(
        "evidence-smoke.yaml",
        study_name,
        postgres_url,
        assets,
        min(3, available_cpus()),  # hpo tune refuses more workers than cores (issue #34 item 5)
        "--set",
        "n_trials=7",
        "--set",
        "train.epochs=1",
        "--set",
        "keep_top_k=0",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    study = read_study(study_name, postgres_url)
    assert len(_finished(study)) == 7
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    numbers = [t.number for t in study.trials]
    assert len(numbers) == len(set(numbers))


def test_rerun_of_a_finished_study_runs_nothing_more(postgres_url, study_name, assets):
    args = ("--set", "n_trials=2", "--set", "train.epochs=1")
    first = _tune("evidence-smoke.yaml", study_name, postgres_url, assets, 1, *args)
    assert first.returncode == 0, first.stderr[-2000:]
    again = _tune("evidence-smoke.yaml", study_name, postgres_url, assets, 2, *args)
    assert again.returncode == 0, again.stderr[-2000:]
    study = read_study(study_name, postgres_url)
    assert len(study.trials) == 2


def test_ctrl_c_stops_workers_and_requeues_their_trials(postgres_url, study_name, assets):
    out = assets["root"] / study_name
    cmd = [
        sys.executable,
        "-m",
        "hpo",
        "tune",
        str(REPO / "studies" / "evidence-smoke.yaml"),
        "--workers",
        "2",
        "--storage",
        postgres_url,
        "--no-progress",
        "--set",
        f"name={study_name}",
        "--set",
        f"data_dir={assets['data']}",
        "--set",
        f"output_dir={out}",
        "--set",
        "keep_top_k=0",
        "--set",
        f"model_paths.tiny-roberta={assets['roberta']}",
        "--set",
        f"model_paths.tiny-deberta={assets['deberta']}",
        "--set",
        "train.epochs=20",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=assets["root"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                if (
                    len(
                        read_study(study_name, postgres_url).get_trials(
                            states=(TrialState.RUNNING,)
                        )
                    )
                    == 2
                ):
                    break
            except KeyError:
                continue
        proc.send_signal(signal.SIGINT)  # what Ctrl-C in the terminal sends the launcher
        output, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output[-3000:]
    study = read_study(study_name, postgres_url)
    assert not study.get_trials(states=(TrialState.RUNNING,)), (
        "nothing may be left RUNNING\n" + output[-3000:]
    )
    interrupted = study.get_trials(states=(TrialState.FAIL,))
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert len(interrupted) == 2 and len(queued) == 2
    assert sorted(map(str, (t.params for t in interrupted))) == sorted(
        map(str, (t.params for t in queued))
    )
