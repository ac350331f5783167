"""End to end: the real CLI starts worker processes on one real PostgreSQL study."""

from __future__ import annotations

import hashlib
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
from optuna_dashboard import get_note

from hpo.outputs import study_dir
from hpo.study.records import trial_metrics
from tests.support import REPO
from tests.support.shared_storage import read_study, running_trials, wait_for
from tests.support.tune_cli import run_tune, tune_assets

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta):
    return tune_assets(tmp_path_factory.mktemp("tune"), tiny_roberta, tiny_deberta)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _finished(study: optuna.Study) -> list:
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


@pytest.mark.parametrize("task", ["criteria", "evidence"])
def test_smoke_study_with_two_workers_on_postgres(task, postgres_url, study_name, assets):
    run = run_tune(f"{task}-smoke.yaml", study_name, postgres_url, assets, 2)
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
    assert "macro_f1" in trial_metrics(best)  # one attribute per metric, as the dashboard shows
    assert {
        "epochs_run",
        "micro_batch_size",
        "wall_seconds",
        "train_samples_per_second",
        "peak_memory_mb",
    } <= set(best.user_attrs)
    folder = study_dir(assets["root"] / study_name, study_name, study.user_attrs["uid"])
    for trial in finished:
        assert (folder / f"trial_{trial.number}" / "train.log").exists()
    # Only the top-k (3) checkpoints stay on disk, each named by an artifact (not copied).
    kept = sorted(p.parent.name for p in folder.glob("trial_*/checkpoint"))
    complete = sorted(study.get_trials(states=(TrialState.COMPLETE,)), key=lambda t: -t.value)
    assert kept == sorted(f"trial_{t.number}" for t in complete[:3])
    for trial in complete:  # each trial's metrics name the study and trial they belong to
        recorded = json.loads((folder / f"trial_{trial.number}" / "metrics.json").read_text())
        assert (recorded["study_uid"], recorded["trial"]) == (study.user_attrs["uid"], trial.number)
    for trial in complete[:3]:
        names = {m.filename for m in get_all_artifact_meta(trial, storage=study._storage)}
        assert {"checkpoint.json", "metrics.json"} <= names
        reference = json.loads((folder / f"trial_{trial.number}" / "checkpoint.json").read_text())
        assert reference["checkpoint"] == trial.user_attrs["checkpoint"]
    # the artifact store holds references and logs, never a copy of a checkpoint's file
    weights = {_digest(p) for p in folder.glob("trial_*/checkpoint/**/*") if p.is_file()}
    stored = [p for p in (assets["root"] / study_name / "artifacts").rglob("*") if p.is_file()]
    assert stored and not weights & {_digest(p) for p in stored}
    assert "best trial" in run.stdout
    # written by the launcher once its workers have gone (optuna-dashboard is slow to import)
    assert study.metric_names == ["macro_f1"]
    assert get_note(study).startswith(f"## {study_name}: {task}, maximize validation macro_f1")


def test_three_workers_end_at_exactly_n_trials(postgres_url, study_name, assets):
    from hpo.process import available_cpus

    run = run_tune(
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
    started = time.monotonic()
    first = run_tune("evidence-smoke.yaml", study_name, postgres_url, assets, 1, *args)
    first_took = time.monotonic() - started
    assert first.returncode == 0, first.stderr[-2000:]
    started = time.monotonic()
    again = run_tune("evidence-smoke.yaml", study_name, postgres_url, assets, 2, *args)
    took = time.monotonic() - started
    assert again.returncode == 0, again.stderr[-2000:]
    study = read_study(study_name, postgres_url)
    assert len(study.trials) == 2
    # "done" at once: no checks (the data, every encoder's tokenizer) and no worker started
    assert f"study {study_name!r} is done: it holds 2 finished trials" in again.stdout
    # and its summary does not say it ran them (issue #48 item 9)
    assert f"study {study_name!r} was already done: 2 of 2 trials finished" in again.stdout
    assert "ran for" not in again.stdout
    assert "best trial" in again.stdout
    assert took < first_took / 2, (took, first_took)
    # a spec asking fewer than the study holds: the count is the study's, not the spec's
    fewer = run_tune("evidence-smoke.yaml", study_name, postgres_url, assets, 1, "--set",
                     "n_trials=1", "--set", "train.epochs=1")  # fmt: skip
    assert fewer.returncode == 0, fewer.stderr[-2000:]
    assert "is done: it holds 2 finished trials (n_trials is 1)" in fewer.stdout


def test_a_resumed_study_samples_new_configurations(postgres_url, study_name, assets):
    """Tuned to 4 trials, then resumed to 8 with the same spec: its one worker (of the same
    name) replayed trials 0-3's parameters exactly, as its sampler's seed did not move."""
    args = ["--set", "train.epochs=1", "--set", "keep_top_k=0"]
    args += ["--set", "sampler.options={n_startup_trials: 10}"]  # every draw the seed's
    for n_trials in (4, 8):
        run = run_tune(
            "criteria-smoke.yaml", study_name, postgres_url, assets, 1,
            "--set", f"n_trials={n_trials}", *args,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    finished = _finished(read_study(study_name, postgres_url))
    assert len(finished) == 8
    points = {tuple(sorted(t.params.items())) for t in finished}
    assert len(points) == 8, sorted(points)


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
        "--progress",  # the bar on, into a pipe too: its last word must be that nothing runs
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
        "--set",
        "pruner={name: none}",  # no trial ends between the look below and the Ctrl-C
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
        wait_for(lambda: running_trials(study_name, postgres_url, 2), 240, "two running trials")
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
    # the bar (stderr, here in the same pipe) and the summary say re-queued, not failed/running
    bar = output.rsplit("running=", 1)[-1]
    assert bar.startswith("0 ") and " failed=0 re-queued=2 " in bar, output[-3000:]
    (trials,) = [line for line in output.splitlines() if line.startswith("  trials    ")]
    assert "2 re-queued" in trials and "failed" not in trials, trials
    assert f"study {study_name!r} stopped after " in output
    assert "  next      hpo tune " in output, output[-3000:]  # the command that resumes it
