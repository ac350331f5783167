"""The objective finds its study's folder from the study's uid, even when built without it."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import optuna
import pytest

from hpo.attributes import CHECKPOINT_SEAL_ATTR, TRAINING_DIGEST_ATTR
from hpo.errors import UsageError
from hpo.fixtures import write_sample
from hpo.run.objective import Objective
from hpo.spec import StudySpec, load_spec
from hpo.study import open_study
from hpo.study.records import study_uid, trial_metrics
from hpo.study.storage import get_storage
from tests.support import REPO
from tests.support.shared_storage import read_study

SMOKE = REPO / "studies" / "evidence-smoke.yaml"


@pytest.fixture
def spec(tmp_path, sqlite_url, study_name, tiny_roberta) -> StudySpec:
    data = write_sample(tmp_path / "data", posts=30, seed=0)
    return load_spec(
        SMOKE,
        [
            f"name={study_name}",
            f"data_dir={data}",
            f"output_dir={tmp_path / 'out'}",
            "train.epochs=1",
            "search_space.encoder.choices=[tiny-roberta]",
            f"model_paths.tiny-roberta={tiny_roberta}",
            f"train.cache_dir={tmp_path / 'cache'}",
        ],
        sqlite_url,
        env={},
    )


@pytest.mark.slow
def test_an_objective_built_without_a_uid_writes_into_its_studys_folder(spec):
    spec = spec.model_copy(update={"train": {**spec.train, "seed": 7}})
    study = open_study(spec)
    study.optimize(Objective(spec), n_trials=1)
    uid = study_uid(study)
    recorded = json.loads((spec.study_dir(uid) / "trial_0" / "metrics.json").read_text())
    assert (recorded["study_uid"], recorded["trial"]) == (uid, 0)
    # each trial records the seed it ran with, and what it trained (finalize compares them)
    assert study.trials[0].user_attrs["seed"] == recorded["seed"] == 7
    config = spec.train_config(study.trials[0].params, checkpoint_dir=None)
    assert recorded[TRAINING_DIGEST_ATTR] == config.training_digest()
    other = dataclasses.replace(config, seed=8, checkpoint_dir="elsewhere")
    assert other.training_digest() != config.training_digest(), "the seed is part of it"
    moved = dataclasses.replace(config, checkpoint_dir="elsewhere", cache_dir="other-cache")
    assert moved.training_digest() == config.training_digest(), "where outputs go is not"
    # and the seal of the checkpoint it kept: finalize reuses the folder only while it holds it
    from hpo.models.classifier_file import read_checked

    kept = study.trials[0].user_attrs
    assert kept[CHECKPOINT_SEAL_ATTR] == read_checked(kept["checkpoint"]).integrity.digest


@pytest.mark.slow
def test_a_trial_records_where_it_stands_and_says_it_in_its_log(spec, caplog):
    """At each epoch's end (and every 30 s) the loop says epoch, step, loss, pace and ETA, and at
    the epoch's end the validation metric and the trial's best so far: in the trial's train.log,
    and on the trial for `hpo status`."""
    caplog.set_level("INFO", logger="hpo")  # as a worker logs
    study = open_study(spec)
    study.optimize(Objective(spec), n_trials=1)
    progress = study.trials[0].user_attrs["progress"]
    assert (
        progress["epoch"] == progress["epochs"] == 1 and progress["step"] == progress["steps"] > 0
    )
    assert (
        progress["eta_seconds"] == 0
        and progress["examples_per_second"] > 0
        and progress["loss"] > 0
    )
    log = (spec.study_dir(study_uid(study)) / "trial_0" / "train.log").read_text()
    value = study.trials[0].value
    assert f"epoch 1/1 done: {spec.metric} {value:.4f}, best {value:.4f} (epoch 1), loss" in log
    assert "ETA 0m00s" in log
    assert progress["best"] == {"value": round(value, 4), "epoch": 1}


@pytest.mark.slow
def test_the_pruner_reads_the_prune_on_metric_while_the_objective_stays_the_study_metric(spec):
    spec = spec.model_copy(update={"prune_on": "auroc"})
    study = open_study(spec)
    study.optimize(Objective(spec), n_trials=1)
    trial = study.trials[0]
    metrics = trial_metrics(trial)
    epoch_end = spec.pruner.units_per_epoch  # the step of epoch 1's end
    # the trial's metric attributes are rounded to 4 decimals (metric:NAME)
    assert trial.intermediate_values[epoch_end] == pytest.approx(metrics["auroc"], abs=5e-5)
    assert (
        trial.value == pytest.approx(metrics[spec.metric], abs=5e-5)
        and metrics["auroc"] != metrics[spec.metric]
    )


@pytest.mark.slow
def test_only_a_trial_the_time_budget_cut_short_is_said_to_have_been_ended_by_it(spec):
    """A trial at its last epoch's end when the budget runs out has run its whole schedule:
    its line said "ended by the time budget" all the same (issue #48 item 9). One with an epoch
    to go is stopped there, kept, and says why."""
    spent = time.time() - 1  # the budget ran out before the trials started
    for epochs, stopped in ((1, False), (2, True)):
        spec_now = spec.model_copy(update={"train": {**spec.train, "epochs": epochs}})
        study = open_study(spec_now)
        study.optimize(Objective(spec_now, deadline=spent), n_trials=1)
        trial = study.trials[-1]
        assert trial.state.name == "COMPLETE" and trial.user_attrs["epochs_run"] == 1
        assert ("stopped_by" in trial.user_attrs) is stopped, trial.user_attrs.get("stopped_by")


def test_an_objective_on_a_study_without_a_uid_writes_nothing(spec):
    study = optuna.create_study(
        study_name=spec.name, storage=get_storage(spec.storage), direction="maximize"
    )
    with pytest.raises(UsageError, match="has no uid to name its folder"):
        study.optimize(Objective(spec), n_trials=1)
    assert [p.name for p in Path(spec.output_dir).iterdir()] == ["artifacts"]


@pytest.fixture
def small_disk(tmp_path):
    """A real 400 KB file system: room for logs and metrics, none for a checkpoint."""
    import os
    import subprocess

    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        pytest.skip("needs root to mount a small tmpfs")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_a_full_disk_fails_trials_with_the_reason_and_frees_what_they_wrote(spec, small_disk):
    import os

    from hpo.run import worker as worker_module

    spec = spec.model_copy(update={"output_dir": str(small_disk), "keep_top_k": 2})
    with pytest.raises(worker_module.TooManyFailures, match="No space left on device"):
        worker_module.run_worker(spec, worker="w", poll_seconds=0.1)
    study = read_study(spec.name, spec.storage.text)
    failed = study.get_trials(states=(optuna.trial.TrialState.FAIL,))
    assert len(failed) == worker_module.MAX_CONSECUTIVE_FAILURES
    assert all("No space left on device" in t.user_attrs["fail_reason"] for t in failed)
    leftovers = [
        p
        for p in small_disk.rglob("*")
        if p.name in ("checkpoint", "checkpoint.json") or p.suffix == ".safetensors"
    ]
    assert not leftovers, leftovers
    free = os.statvfs(small_disk)
    assert free.f_bavail * free.f_frsize > 300_000, (
        "the partial checkpoints were removed: the disk is not full"
    )
