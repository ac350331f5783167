"""MLflow tracking: every trial of a real 2-worker study as an MLflow run, read back from a
real MLflow store; a tracking server that is down warns once per worker and fails nothing."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from hpo.attributes import RUN_ID_ATTR
from hpo.spec import SpecError, load_spec, set_flags
from hpo.study.records import is_surplus
from hpo.tracking import Tracker
from tests.support import REPO
from tests.support.helpers import free_port
from tests.support.shared_storage import read_trials
from tests.support.tune_cli import study_sets, tune_assets

mlflow = pytest.importorskip(
    "mlflow", reason="the tracking extra is not installed: pip install 'hpo[tracking]'"
)
from mlflow.tracking import MlflowClient  # noqa: E402

SMOKE = REPO / "studies" / "criteria-smoke.yaml"
FINISHED = ("COMPLETE", "PRUNED")


def _down_url() -> str:
    """An MLflow server URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


def test_tracking_is_part_of_the_spec_and_unknown_keys_are_refused():
    spec = load_spec(SMOKE, ["tracking.mlflow=sqlite:///mlflow.db"])
    assert spec.tracking.mlflow == "sqlite:///mlflow.db"
    assert load_spec(SMOKE).tracking.mlflow is None
    with pytest.raises(SpecError, match=r"tracking\.mlfow: unknown key"):
        load_spec(SMOKE, ["tracking.mlfow=sqlite:///mlflow.db"])


def test_without_a_uri_the_tracker_does_nothing():
    tracker = Tracker(None, "study")
    with tracker.trial_run(0, {"lr": 0.1}) as run:
        run.log_epoch("val_macro_f1", 0.5, 1)
        run.log_final({"macro_f1": 0.5})
    assert run.run_id is None and tracker._client is None


def test_a_tracking_server_that_is_down_warns_once_and_then_stays_off(caplog):
    url = _down_url()
    tracker = Tracker(f"{url.replace('http://', 'http://me:hunter2@')}", "study", worker="node/0")
    with caplog.at_level(logging.WARNING, logger="hpo.tracking"):
        for number in range(3):
            with tracker.trial_run(number, {"lr": 0.1}) as run:
                run.log_epoch("val_macro_f1", 0.5, 1)
                run.log_final({"macro_f1": 0.5})
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    line = caplog.records[0].getMessage()
    assert "\n" not in line and "tracking is off for worker node/0, trials go on" in line, line
    assert "hunter2" not in line and "me:***@" in line, "the URL's password is masked"
    assert not tracker.enabled and run.run_id is None


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta):
    return tune_assets(tmp_path_factory.mktemp("tracking"), tiny_roberta, tiny_deberta)


def _tune(name: str, storage: str, assets, tracking_uri: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "hpo",
        "tune",
        str(SMOKE),
        "--workers",
        "2",
        "--storage",
        storage,
        "--no-progress",
        *set_flags(study_sets(name, assets)),
        "--set",
        "n_trials=4",
        "--set",
        "train.epochs=2",
        "--set",
        "keep_top_k=0",
        "--set",
        f"tracking.mlflow={tracking_uri}",
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=assets["root"])


@pytest.mark.slow
@pytest.mark.postgres
def test_every_trial_of_a_two_worker_study_is_an_mlflow_run(
    postgres_url, study_name, assets, tmp_path
):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = _tune(study_name, postgres_url, assets, uri)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "MLflow tracking" not in run.stdout + run.stderr, "no tracking warning when it works"
    trials = [t for t in read_trials(study_name, postgres_url) if t.state.name in FINISHED]
    assert len(trials) == 4

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(study_name)
    runs = {r.info.run_id: r for r in client.search_runs([experiment.experiment_id])}
    assert len(runs) == 4, "one run per trial, nothing else"
    workers = set()
    for trial in trials:
        logged = runs[trial.user_attrs[RUN_ID_ATTR]]  # the finalize hook: the trial names its run
        tags, params = logged.data.tags, logged.data.params
        assert (tags["hpo.study"], tags["hpo.trial"], tags["hpo.state"]) == (
            study_name,
            str(trial.number),
            trial.state.name,
        )
        assert tags["hpo.worker"] == trial.user_attrs["worker"]
        assert logged.info.run_name == f"trial-{trial.number}"
        assert logged.info.status == "FINISHED"
        assert {k: params[k] for k in trial.params} == {k: str(v) for k, v in trial.params.items()}
        assert params["train.epochs"] == "2"
        history = client.get_metric_history(logged.info.run_id, "val_macro_f1")
        assert {m.step: m.value for m in history} == pytest.approx(trial.intermediate_values)
        if trial.state.name == "COMPLETE":
            assert logged.data.metrics["macro_f1"] == pytest.approx(trial.value)
            assert logged.data.metrics["epochs_run"] == trial.user_attrs["epochs_run"]
        workers.add(tags["hpo.worker"])
    assert len(workers) == 2, "both workers logged runs"


@pytest.mark.slow
@pytest.mark.postgres
def test_a_tracking_server_that_is_down_fails_no_trial_and_each_worker_warns_once(
    postgres_url, study_name, assets
):
    run = _tune(study_name, postgres_url, assets, _down_url())
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    trials = read_trials(study_name, postgres_url)
    assert len([t for t in trials if t.state.name in FINISHED]) == 4
    assert not [t for t in trials if t.state.name == "FAIL" and not is_surplus(t)], (
        "tracking failed no trial"
    )
    assert all(t.user_attrs[RUN_ID_ATTR] is None for t in trials if t.state.name in FINISHED), (
        "no stale run id"
    )
    warned = [line for line in output.splitlines() if "tracking is off for worker" in line]
    assert (
        len(warned) == 2
        and len({line.split("tracking is off for worker ")[1] for line in warned}) == 2
    ), output
    assert "Traceback" not in output and "Retrying" not in output, output[
        -3000:
    ]  # one line, not a retry storm


def test_the_final_model_is_logged_as_its_own_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the sqlite backend keeps artifacts under the working directory
    model = tmp_path / "final" / "model"
    model.mkdir(parents=True)
    (model / "classifier.json").write_text("{}")
    (tmp_path / "final" / "model_card.md").write_text("# card")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = Tracker(uri, "study-x").log_final_model(
        {"learning_rate": 3e-5},
        {"macro_f1": 0.61},
        {"model": model, "model_card.md": tmp_path / "final" / "model_card.md"},
    )
    run = MlflowClient(tracking_uri=uri).get_run(run_id)
    assert run.info.run_name == "final" and run.info.status == "FINISHED"
    assert run.data.metrics == {"test_macro_f1": 0.61} and run.data.params == {
        "learning_rate": "3e-05"
    }
    logged = {f.path for f in MlflowClient(tracking_uri=uri).list_artifacts(run_id)}
    assert {"model", "model_card.md"} <= logged
