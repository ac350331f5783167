"""The read-only CLI commands (status, best, export, validate) on real finished studies, run
through the real ``hpo`` entry point; and Optuna's own CLI reading the same study."""

from __future__ import annotations

import csv
import itertools
import json
import re
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path

import optuna
import pytest
from helpers import run_hpo
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState
from shared_storage import read_study

from hpo.cli import main
from hpo.fixtures import write_sample
from hpo.outputs import TrialOutputs
from hpo.run.worker import run_worker
from hpo.spec import load_spec
from hpo.study import get_storage, metric_attrs

REPO = Path(__file__).parent.parent
SMOKE = REPO / "studies" / "criteria-smoke.yaml"
OPTUNA = Path(sys.executable).parent / "optuna"
SPACE = {
    "learning_rate": FloatDistribution(1e-3, 6e-3, log=True),
    "head_layers": IntDistribution(0, 1),
    "pooling": CategoricalDistribution(["cls", "mean"]),
}
# (macro_f1, accuracy) per finished trial; None: pruned after one epoch
RESULTS = [(0.61, 0.70), (0.87, 0.91), None, (0.74, 0.80)]
BEST = 1


def build_study(url: str, name: str, checkpoints: Path, n_trials: int) -> optuna.Study:
    """A study shaped like the one the objective writes: params, per-epoch reports,
    metric:NAME / epochs_run / wall_seconds / checkpoint user attributes, and trial folders
    under ``checkpoints`` (its output_dir) whose metrics.json names the study and trial."""
    study = optuna.create_study(study_name=name, storage=get_storage(url), direction="maximize")
    uid = uuid.uuid4().hex
    for key, value in {
        "task": "criteria",
        "metric": "macro_f1",
        "n_trials": n_trials,
        "spec_file": str(SMOKE),
        "uid": uid,
    }.items():
        study.set_user_attr(key, value)
    outputs = TrialOutputs(checkpoints, name, uid, keep_top_k=len(RESULTS), direction="maximize")
    for number, result in enumerate(RESULTS):
        trial = study.ask(SPACE)
        trial.set_user_attr("worker", "node/0")
        if result is None:
            trial.report(0.05, 0)
            trial.set_user_attr("epochs_run", 1)
            study.tell(trial, state=TrialState.PRUNED)
            continue
        macro_f1, accuracy = result
        for epoch, value in enumerate((macro_f1 - 0.1, macro_f1)):
            trial.report(value, epoch)
        checkpoint = outputs.checkpoint_dir(number)
        checkpoint.mkdir(parents=True)
        outputs.write_metrics(number, {"value": macro_f1})
        for key, value in metric_attrs({"macro_f1": macro_f1, "accuracy": accuracy}).items():
            trial.set_user_attr(key, value)
        trial.set_user_attr("epochs_run", 2)
        trial.set_user_attr("wall_seconds", 10.5 + number)
        trial.set_user_attr("checkpoint", str(checkpoint))
        study.tell(trial, macro_f1)
    return study


@pytest.fixture
def finished(postgres_url, study_name, tmp_path) -> optuna.Study:
    return build_study(postgres_url, study_name, tmp_path / "checkpoints", n_trials=len(RESULTS))


def hpo(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- status --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_status_prints_counts_best_and_rate(capsys, postgres_url, study_name, tmp_path):
    build_study(postgres_url, study_name, tmp_path, n_trials=10)
    code, out, err = hpo(capsys, "status", study_name, "--storage", postgres_url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"study {study_name} (criteria, maximize macro_f1)"
    assert lines[1].split() == ["complete=3", "pruned=1", "failed=0", "running=0", "waiting=0"]
    assert lines[2].split() == ["finished", "4/10", "best", "0.8700"]
    assert lines[3].endswith("trials/hour") and float(lines[3].split()[0]) > 0
    assert "ETA" not in out, "no trial runs: nothing moves the study, so no ETA"


def test_status_eta_comes_from_the_running_trials_own(capsys, sqlite_url, study_name, tmp_path):
    """#36: the study's ETA said 26 s while its only running trial said 4 min. The trials left
    start as workers come free and last as the finished ones did."""
    study = build_study(sqlite_url, study_name, tmp_path, n_trials=5)
    going = study.ask(SPACE)
    going.set_user_attr(
        "progress",
        {"epoch": 1, "epochs": 4, "step": 3, "steps": 75, "eta_seconds": 240.0, "at": time.time()},
    )
    code, out, err = hpo(capsys, "status", study_name, "--storage", sqlite_url)
    assert code == 0, err
    assert "ETA 4 min" in out.splitlines()[3]  # the trial's own 4 min; no trial left to start
    assert f"trial {going.number} running on ?: epoch 1/4 step 3/75, ETA 4 min" in out

    # 4 minutes, said 2 minutes ago: 2 minutes left
    going.set_user_attr(
        "progress",
        {
            "epoch": 3,
            "epochs": 4,
            "step": 9,
            "steps": 75,
            "eta_seconds": 240.0,
            "at": time.time() - 120,
        },
    )
    code, out, _ = hpo(capsys, "status", study_name, "--storage", sqlite_url)
    assert "ETA 2 min" in out.splitlines()[3]


def test_status_sets_the_estimate_beside_the_epochs_the_trials_took(
    capsys, sqlite_url, study_name, tmp_path
):
    from hpo.study import open_study, record_trial_cost

    spec = load_spec(SMOKE, [f"name={study_name}", f"output_dir={tmp_path}"], sqlite_url)
    study = open_study(spec)  # records the spec, and with it where the estimate is kept
    record_trial_cost(
        spec, 30.0, 2, [{"params": {"encoder": "tiny-roberta"}, "epoch_s": 6.0, "threads": 1}]
    )
    encoder = {"encoder": CategoricalDistribution(["tiny-roberta", "tiny-deberta"])}
    code, out, err = hpo(capsys, "status", study_name, "--storage", sqlite_url)
    assert code == 0 and "--estimate said" not in out, "no trial has run yet"
    for name, wall in [
        ("tiny-roberta", 10.0),
        ("tiny-roberta", 14.0),
        ("tiny-roberta", 18.0),
        ("tiny-deberta", 6.0),
    ]:  # 2 s of setup, then 4 epochs
        study.add_trial(
            optuna.trial.create_trial(
                params={"encoder": name},
                distributions=encoder,
                value=0.5,
                user_attrs={"epochs_run": 4, "setup_seconds": 2.0, "wall_seconds": wall},
            )
        )
    code, out, err = hpo(capsys, "status", study_name, "--storage", sqlite_url)
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if "complete trials took" in line]
    # which figure is which, and the trials as a share of the estimate (issue #48 item 6: "said
    # 6.0 s at 1 thread: 2.0x that" read either way)
    assert line == (
        "  encoder=tiny-roberta: hpo validate --estimate said 6.0 s an epoch at 1 thread; "
        "its 3 complete trials took 3.0 s an epoch (median), 0.5x the estimate"
    ), "tiny-deberta was not timed, so it is not compared"


def test_status_shows_where_each_running_trial_is(capsys, sqlite_url, study_name, tmp_path):
    study = build_study(sqlite_url, study_name, tmp_path, n_trials=10)
    fresh, going = study.ask(SPACE), study.ask(SPACE)
    fresh.set_user_attr("worker", "node/1")
    going.set_user_attr("worker", "node/0")
    going.set_user_attr(
        "progress",
        {
            "epoch": 2,
            "epochs": 4,
            "step": 31,
            "steps": 75,
            "loss": 0.41,
            "examples_per_second": 37.5,
            "eta_seconds": 372.0,
        },
    )
    code, out, err = hpo(capsys, "status", study_name, "--storage", sqlite_url)
    assert code == 0, err
    assert f"trial {going.number} running on node/0: epoch 2/4 step 31/75, ETA 6 min" in out
    assert f"trial {fresh.number} running on node/1: starting" in out


def test_status_of_a_finished_study_has_no_eta(capsys, finished, postgres_url):
    code, out, _ = hpo(capsys, "status", finished.study_name, "--storage", postgres_url)
    assert code == 0
    assert "finished 4/4" in out
    assert "trials/hour" in out and "ETA" not in out


def test_status_on_sqlite(capsys, sqlite_url, study_name, tmp_path):
    build_study(sqlite_url, study_name, tmp_path, n_trials=5)
    code, out, _ = hpo(capsys, "status", study_name, "--storage", sqlite_url)
    assert code == 0
    assert "complete=3  pruned=1" in out and "ETA" not in out  # no trial running
    assert "finished 4/5   best 0.8700" in out  # rounded as hpo best rounds it


def test_status_reads_the_storage_from_the_environment(capsys, monkeypatch, finished, postgres_url):
    monkeypatch.setenv("HPO_STORAGE", postgres_url)
    code, out, _ = hpo(capsys, "status", finished.study_name)
    assert code == 0 and f"study {finished.study_name} " in out


# ---- best ----------------------------------------------------------------------------------------


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


# ---- export --------------------------------------------------------------------------------------


def test_export_csv_has_one_row_per_trial_with_flat_columns(
    capsys, finished, postgres_url, tmp_path
):
    out_file = tmp_path / "trials.csv"
    code, _, err = hpo(
        capsys,
        "export",
        finished.study_name,
        "--storage",
        postgres_url,
        "--format",
        "csv",
        "--out",
        str(out_file),
    )
    assert code == 0
    assert f"wrote 4 trials to {out_file}" in err
    with out_file.open(newline="") as stream:
        reader = csv.DictReader(stream)
        rows = list(reader)
        columns = reader.fieldnames
    assert [int(row["number"]) for row in rows] == [0, 1, 2, 3]
    assert [row["state"] for row in rows] == ["COMPLETE", "COMPLETE", "PRUNED", "COMPLETE"]
    for name in (
        "params.learning_rate",
        "params.head_layers",
        "params.pooling",
        "metrics.macro_f1",
        "metrics.accuracy",
        "user_attrs.epochs_run",
        "user_attrs.wall_seconds",
        "user_attrs.checkpoint",
        "datetime_start",
        "value",
    ):
        assert name in columns
    assert not any(column in ("params", "user_attrs", "metrics") for column in columns)
    assert not any(column.startswith("user_attrs.metric") for column in columns)
    for row, trial in zip(rows, finished.trials, strict=True):
        assert float(row["params.learning_rate"]) == pytest.approx(trial.params["learning_rate"])
        assert row["params.pooling"] == trial.params["pooling"]
    assert float(rows[BEST]["metrics.macro_f1"]) == pytest.approx(0.87)
    assert float(rows[BEST]["metrics.accuracy"]) == pytest.approx(0.91)
    # pruned: Optuna keeps its last report as the value; it has no metrics
    assert float(rows[2]["value"]) == pytest.approx(0.05) and rows[2]["metrics.macro_f1"] == ""
    assert rows[2]["user_attrs.epochs_run"] == "1"


def test_export_json_keeps_the_nesting(capsys, finished, postgres_url, tmp_path):
    out_file = tmp_path / "trials.json"
    code, _, _ = hpo(
        capsys,
        "export",
        finished.study_name,
        "--storage",
        postgres_url,
        "--format",
        "json",
        "--out",
        str(out_file),
    )
    assert code == 0
    rows = json.loads(out_file.read_text())
    assert len(rows) == 4
    assert rows[BEST]["value"] == pytest.approx(0.87)
    assert rows[BEST]["params"] == finished.trials[BEST].params
    assert rows[BEST]["metrics"] == {"macro_f1": 0.87, "accuracy": 0.91}
    assert rows[2]["state"] == "PRUNED" and rows[2]["metrics"] == {}
    assert all(row["datetime_start"] for row in rows)


def test_export_to_standard_output(capsys, finished, postgres_url):
    code, out, _ = hpo(
        capsys, "export", finished.study_name, "--storage", postgres_url, "--format", "csv"
    )
    assert code == 0
    rows = list(csv.DictReader(out.splitlines()))
    assert len(rows) == 4 and rows[BEST]["metrics.macro_f1"] == "0.87"


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


# ---- errors --------------------------------------------------------------------------------------


def test_unknown_study_is_exit_2_listing_the_studies_there(
    capsys, sqlite_url, study_name, tmp_path
):
    build_study(sqlite_url, study_name, tmp_path, n_trials=4)
    for command in ("status", "best", "export", "report", "finalize", "dashboard"):
        code, out, err = hpo(capsys, command, "no-such-study", "--storage", sqlite_url)
        assert code == 2
        assert out == ""
        assert err.count("\n") == 1
        assert err.startswith("hpo: error: no study named 'no-such-study'")
        assert f"studies there: {study_name}" in err


def test_unreachable_storage_is_exit_2_and_never_shows_the_password():
    result = run_hpo("status", "x", "--storage", "postgresql://u:topsecret@127.0.0.1:1/db")
    assert result.returncode == 2
    assert "topsecret" not in result.stdout + result.stderr
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "hpo: error: cannot use the database at postgresql+psycopg2://u:***@127.0.0.1:1/db"
    )


def test_unknown_study_in_a_subprocess_exits_2(sqlite_url):
    result = run_hpo("best", "no-such-study", "--storage", sqlite_url)
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"hpo: error: no study named 'no-such-study' in {sqlite_url}; studies there: none"
    )


# ---- validate ------------------------------------------------------------------------------------


def test_validate_names_a_missing_data_directory(capsys, sqlite_url, tmp_path):
    missing = tmp_path / "no-data-here"
    code, out, err = hpo(
        capsys, "validate", str(SMOKE), "--set", f"data_dir={missing}", "--storage", sqlite_url
    )
    assert code == 2
    assert err.count("\n") == 1 and str(missing) in err and "data directory not found" in err
    assert "valid" not in out
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # validate creates nothing


def test_validate_names_a_bad_n_trials(capsys, tmp_path):
    code, _, err = hpo(
        capsys, "validate", str(SMOKE), "--set", "n_trials=0", "--set", f"data_dir={tmp_path}"
    )
    assert code == 2
    assert err.count("\n") == 1 and "n_trials" in err and str(SMOKE) in err


# ---- conditional spaces, warm start and enqueue --------------------------------------------------

CONDITIONAL = """\
name: {name}
task: criteria
data_dir: {data_dir}
n_trials: 4
sampler: {{name: tpe, options: {{multivariate: true, group: true, constant_liar: true}}}}
train: {{encoder: {encoder}, max_length: 96}}
search_space:
  adapter: {{type: categorical, choices: [full, lora]}}
  lora_r: {{type: int, low: 4, high: 16, when: {{adapter: lora}}}}
  lora_alpha: {{type: int, low: 8, high: 32, when: {{adapter: lora}}}}
  head_layers: {{type: int, low: 0, high: 2}}
  head_hidden_size: {{type: categorical, choices: [32, 64], when: {{head_layers: [1, 2]}}}}
  learning_rate: {{type: float, low: 1.0e-5, high: 1.0e-3, log: true}}
warm_start:
  - {{adapter: full, head_layers: 0, learning_rate: 2e-5}}
  - {{adapter: lora, lora_r: 8, learning_rate: 3e-4}}
"""


@pytest.fixture
def conditional(tmp_path, study_name) -> Path:
    path = tmp_path / "conditional.yaml"
    path.write_text(
        CONDITIONAL.format(name=study_name, data_dir=tmp_path / "data", encoder="unused")
    )
    return path


def test_validate_shows_the_conditions_and_the_warm_start(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    write_sample(tmp_path / "data", posts=40, seed=0)
    path = tmp_path / "conditional.yaml"
    path.write_text(
        CONDITIONAL.format(name=study_name, data_dir=tmp_path / "data", encoder=tiny_roberta)
    )
    code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url)
    assert code == 0, err
    assert "lora_r, lora_alpha: sampled only when adapter is lora" in out
    assert "head_hidden_size: sampled only when head_layers in 1, 2" in out
    assert "warm start: 2 parameter sets, queued once when the study is created" in out


def test_validate_warns_when_pruning_on_a_signal_the_metric_does_not_judge_by(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    """prune_on: average_precision for an F1 judged at a fixed 0.5 ranked the configurations
    that end best last (bench pruning_regret); validate says so, and says nothing when the
    threshold is tuned on validation or the pruner judges the metric itself."""
    write_sample(tmp_path / "data", posts=40, seed=0)
    spec = CONDITIONAL.format(name=study_name, data_dir=tmp_path / "data", encoder=tiny_roberta)
    cases = {
        "fixed": ("prune_on: average_precision\nmetric: post_macro_f1\n", True),
        "tuned": (
            "prune_on: average_precision\nmetric: post_macro_f1\n",
            False,
        ),
        "metric itself": ("metric: post_macro_f1\n", False),
    }
    for case, (extra, warned) in cases.items():
        text = extra + spec
        if case == "tuned":
            text = text.replace("max_length: 96}", "max_length: 96, threshold: tuned}")
        path = tmp_path / f"{case.replace(' ', '-')}.yaml"
        path.write_text(text)
        code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url)
        assert code == 0, (case, err)
        said = "warning: prune_on: average_precision ranks how well scores separate" in out
        assert said == warned, (case, out)


def test_validate_reports_the_long_tail_and_a_steps_memory(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    write_sample(tmp_path / "data", posts=60, seed=0, profile="realistic")
    path = tmp_path / "chunks.yaml"
    path.write_text(f"""name: {study_name}
task: criteria
data_dir: {tmp_path / "data"}
n_trials: 1
output_dir: {tmp_path / "out"}
train: {{encoder: {tiny_roberta}, batch_size: 8, long_text: chunks, \
criteria_formulation: multilabel}}
search_space:
  max_length: {{type: categorical, choices: [64, 128]}}
""")
    code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url)
    assert code == 0, err
    tail = re.search(r"posts are ([\d,]+) / ([\d,]+) / ([\d,]+) tokens \(p50 / p99 / max\)", out)
    assert tail and int(tail[3].replace(",", "")) > 500, out
    at_64 = re.search(
        r"long_text=chunks at max_length 64: (\d+) / (\d+) / (\d+) chunks per post", out
    )
    at_128 = re.search(
        r"long_text=chunks at max_length 128: (\d+) / (\d+) / (\d+) chunks per post", out
    )
    assert at_64 and at_128 and int(at_64[3]) > int(at_128[3]) > 1, out
    assert re.search(
        r"a training step holds at most 8 sequences of 128 tokens .* about [\d,]+ MiB", out
    ), out


def test_enqueue_queues_one_parameter_set_beside_the_warm_start(
    capsys, conditional, sqlite_url, study_name
):
    code, out, err = hpo(
        capsys,
        "enqueue",
        str(conditional),
        "--set",
        "adapter=lora",
        "--set",
        "lora_r=12",
        "--set",
        "learning_rate=5e-5",
        "--storage",
        sqlite_url,
    )
    assert code == 0, err
    assert out.startswith(
        f"queued adapter=lora, lora_r=12, learning_rate=5e-05 on study '{study_name}'"
    )
    waiting = optuna.load_study(study_name=study_name, storage=get_storage(sqlite_url)).get_trials(
        states=(TrialState.WAITING,)
    )
    assert [t.system_attrs["fixed_params"] for t in waiting][-1] == {
        "adapter": "lora",
        "lora_r": 12,
        "learning_rate": 5e-5,
    }
    # the spec's two warm-start sets, queued when enqueue created the study, and this one
    assert len(waiting) == 3
    code, out, _ = hpo(
        capsys,
        "enqueue",
        str(conditional),
        "--set",
        "adapter=lora",
        "--set",
        "lora_r=12",
        "--set",
        "learning_rate=5e-5",
        "--storage",
        sqlite_url,
    )
    assert code == 0 and "nothing queued" in out


@pytest.mark.parametrize(
    "params, problem",
    [
        (
            ["lerning_rate=1e-4"],
            "--set lerning_rate: 'lerning_rate' is not in search_space; "
            "did you mean 'learning_rate'?",
        ),
        (["learning_rate=0.5"], "--set learning_rate: learning_rate=0.5 is outside its range"),
        (
            ["adapter=prefix"],
            "--set adapter: 'prefix' is not one of adapter's choices ['full', 'lora']",
        ),
        (["head_layers=one"], "--set head_layers: 'one' is not an integer for head_layers"),
        (["lora_r=8"], "--set lora_r: applies only when adapter is lora"),
        (["train.epochs=2"], "--set: give at least one searched parameter"),
        (["lora.r=2"], "name a searched parameter (e.g. --set learning_rate=2e-5) or a spec"),
        (["name=x", "n_trials=true"], "n_trials: must be a number, not a boolean"),
        (["learning_rate"], "expected the form key=value"),
        (
            ["learning_rate=5e-5", "learning_rate=6e-5"],
            "--set learning_rate: given twice (5e-05, then 6e-05); give it once",
        ),
    ],
    ids=[
        "unknown name",
        "out of range",
        "not a choice",
        "not an integer",
        "condition fails",
        "spec override alone",
        "dotted key that is not a spec's",
        "bad spec override",
        "no value",
        "repeated",
    ],
)
def test_enqueue_of_a_bad_parameter_set_is_one_line_exit_2_and_creates_nothing(
    capsys, conditional, sqlite_url, params, problem
):
    argv = [arg for param in params for arg in ("--set", param)]
    code, out, err = hpo(capsys, "enqueue", str(conditional), *argv, "--storage", sqlite_url)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and problem in err, err
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()


def test_enqueue_never_changes_the_studys_spec(capsys, conditional, sqlite_url, study_name):
    """--allow-spec-change lets enqueue queue onto a study made from another spec; it must not
    make that spec the study's (then the command that made the study would be refused)."""
    code, _, err = hpo(
        capsys, "enqueue", str(conditional), "--set", "adapter=full", "--storage", sqlite_url
    )
    assert code == 0, err
    recorded = optuna.load_study(study_name=study_name, storage=get_storage(sqlite_url)).user_attrs
    other = conditional.with_name("more-trials.yaml")
    other.write_text(conditional.read_text().replace("n_trials: 4", "n_trials: 9"))
    code, out, err = hpo(
        capsys,
        "enqueue",
        str(other),
        "--set",
        "learning_rate=5e-5",
        "--allow-spec-change",
        "--storage",
        sqlite_url,
    )
    assert code == 0 and out.startswith("queued learning_rate=5e-05"), err
    assert (
        optuna.load_study(study_name=study_name, storage=get_storage(sqlite_url)).user_attrs
        == recorded
    )
    code, out, err = hpo(
        capsys, "enqueue", str(conditional), "--set", "learning_rate=6e-5", "--storage", sqlite_url
    )
    assert code == 0, err  # the spec that made the study still opens it


@pytest.mark.parametrize(
    "k, problem",
    [
        ("1", "--cv K needs K >= 2 folds (or 0 for none), got 1"),
        ("-1", "--cv K needs K >= 2 folds (or 0 for none), got -1"),
        ("0", "no study named"),  # 0 is none, as the message says: on to the next check
    ],
)
def test_finalize_cv_has_one_rule_and_one_message(tmp_path, k, problem):
    """--cv 0 was refused by argparse as "must be a positive integer" while --cv 1 said
    "(or 0 for none)" (issue #34 item 10)."""
    run = run_hpo(
        "finalize",
        str(SMOKE),
        "--storage",
        f"sqlite:///{tmp_path / 'none.db'}",
        "--set",
        "name=never-tuned",
        "--cv",
        k,
        cwd=tmp_path,
    )
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and problem in lines[0], run.stderr


def test_enqueue_reaches_a_study_named_by_a_set_override(
    capsys, conditional, sqlite_url, study_name
):
    """hpo tune --set name=X made study X; enqueue takes the same override to queue onto it
    (issue #34 item 14), beside the searched parameters' values."""
    renamed = f"{study_name}-renamed"
    code, out, err = hpo(
        capsys,
        "enqueue",
        str(conditional),
        "--set",
        f"name={renamed}",
        "--set",
        "adapter=full",
        "--storage",
        sqlite_url,
    )
    assert code == 0, err
    assert out.startswith(f"queued adapter=full on study '{renamed}'")
    assert read_study(renamed, sqlite_url).get_trials(states=(TrialState.WAITING,))
    assert study_name not in {s.study_name for s in optuna.get_all_study_summaries(sqlite_url)}


def test_enqueue_without_a_parameter_is_a_usage_error(conditional):
    result = run_hpo("enqueue", str(conditional))
    assert result.returncode == 2 and "--set" in result.stderr and "Traceback" not in result.stderr


def _estimate_spec(tmp_path, study_name: str, rest: str):
    """A 40-trial criteria spec on 40 sample posts: the common head, then ``rest``."""
    write_sample(tmp_path / "data", posts=40, seed=0)
    path = tmp_path / "estimate.yaml"
    path.write_text(
        f"name: {study_name}\ntask: criteria\ndata_dir: {tmp_path / 'data'}\nn_trials: 40\n"
        f"output_dir: {tmp_path / 'out'}\n{rest}"
    )
    return path


def test_validate_estimate_times_every_encoder_at_a_workers_threads(
    capsys, tmp_path, study_name, tiny_roberta, tiny_deberta, sqlite_url
):
    """#36: it timed one of two searched encoders, with every thread of the machine while
    hpo tune --workers 2 gives each worker half of them (a ~15x over-estimate)."""
    from hpo.process import available_cpus

    path = _estimate_spec(
        tmp_path,
        study_name,
        f"""timeout: 7200
model_paths: {{tiny: {tiny_roberta}, tiny-deberta: {tiny_deberta}}}
train: {{batch_size: 4, max_length: 64}}
search_space:
  encoder: {{type: categorical, choices: [tiny, tiny-deberta]}}
  epochs: {{type: int, low: 2, high: 4}}
""",
    )
    code, out, err = hpo(
        capsys, "validate", str(path), "--storage", sqlite_url, "--estimate", "--workers", "2"
    )
    assert code == 0, err
    threads = max(1, available_cpus() // 2)
    for encoder in ("tiny", "tiny-deberta"):
        line = re.search(
            rf"compute, encoder={encoder} on cpu \({threads} threads?, 3 steps of a sampled point "
            r"timed at batch 4, "
            r"max_length 64\): an epoch ≈ (\S+) training \((\d+) steps\) \+ (\S+) validation; "
            r"a trial of 2–4 epochs ≈ (\S+)–(\S+)$",
            out,
            re.M,
        )
        assert line, out
    assert re.search(r"  40 trials ≈ \S+ with 2 at a time, drawing these 2 choices alike", out)
    assert re.search(
        r"timeout 2h00m: about \d+ trials of 4 epochs fit \(\d+% of n_trials; \d+ of the "
        r"costliest choice, \d+ of the cheapest\)",
        out,
    ), out
    assert f"timed at {threads} thread" in out and "hpo tune --workers 2" in out
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # validate creates no study
    # the one thing it keeps: the estimate, for the study's plan and hpo status
    (kept,) = (tmp_path / "out").rglob("*.*")
    record = json.loads(kept.read_text())
    assert kept.name == f"{study_name}.json" and record["workers"] == 2
    assert [(timed["params"], timed["threads"]) for timed in record["choices"]] == [
        ({"encoder": "tiny"}, threads),
        ({"encoder": "tiny-deberta"}, threads),
    ]
    assert all(timed["epoch_s"] > 0 for timed in record["choices"])


def test_validate_estimate_times_the_warm_start_the_study_runs_first(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    """A sampled point, not the first trial, was timed: with freeze_layers, batch size or
    max_length searched, one random draw put a trial's cost at half what trials then took."""
    path = _estimate_spec(
        tmp_path,
        study_name,
        f"""model_paths: {{tiny: {tiny_roberta}}}
train: {{encoder: tiny, batch_size: 4}}
search_space:
  max_length: {{type: categorical, choices: [64, 96, 128]}}
  epochs: {{type: int, low: 2, high: 4}}
warm_start:
  - {{max_length: 96}}
""",
    )
    code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url, "--estimate")
    assert code == 0, err
    assert re.search(
        r"compute, encoder=tiny on cpu \(\d+ threads?, 3 steps of the warm start timed at batch 4, "
        r"max_length 96\): an epoch ≈ \S+ training",
        out,
    ), out


_FORMULATIONS = """train: {{encoder: tiny, batch_size: 4, max_length: 64, epochs: 1}}
model_paths: {{tiny: {encoder}}}
search_space:
  learning_rate: {{type: float, low: 1.0e-4, high: 1.0e-3}}
  criteria_formulation: {{type: categorical, choices: [multilabel, pairs]}}
  long_text: {{type: categorical, choices: [truncate, chunks]{when}}}
warm_start:
  - {{criteria_formulation: multilabel, long_text: truncate}}
"""


def test_validate_estimate_prices_every_formulation_and_long_text_the_space_can_choose(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    """Issue #48 item 6: only the branch the warm start drew was timed (multilabel: 20 steps an
    epoch) while a pairs trial takes 180 (9x). Every combination of the encoder, formulation
    and long-text choices is timed now, read from the space: a new formulation is priced too."""
    rest = _FORMULATIONS.format(encoder=tiny_roberta, when="")
    path = _estimate_spec(tmp_path, study_name, rest)
    code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url, "--estimate")
    assert code == 0, err
    steps = {}
    for formulation, long_text in itertools.product(
        ("multilabel", "pairs"), ("truncate", "chunks")
    ):
        line = re.search(
            rf"compute, encoder=tiny formulation={formulation} long_text={long_text} on cpu "
            rf"\(\d+ threads?, 3 steps of (the warm start|a sampled point) timed at batch 4, "
            r"max_length 64\): an epoch ≈ \S+ training \((\d+) steps\)",
            out,
        )
        assert line, out
        steps[formulation, long_text] = int(line[2])
        warm = (formulation, long_text) == ("multilabel", "truncate")
        assert (line[1] == "the warm start") is warm, line[0]
    # each post once, or once per criterion
    assert steps["pairs", "truncate"] >= 8 * steps["multilabel", "truncate"], steps
    assert "  40 trials ≈ " in out and "drawing these 4 choices alike" in out, out
    (kept,) = (tmp_path / "out").rglob("*.json")
    choices = [timed["params"] for timed in json.loads(kept.read_text())["choices"]]
    assert (
        len(choices) == 4
        and {"encoder": "tiny", "criteria_formulation": "pairs", "long_text": "chunks"} in choices
    )


def test_a_conditional_setting_is_priced_only_where_its_condition_holds(tmp_path, study_name):
    from hpo.run.estimate import priced_choices

    when = ", when: {criteria_formulation: multilabel}"
    path = _estimate_spec(tmp_path, study_name, _FORMULATIONS.format(encoder="x", when=when))
    assert priced_choices(load_spec(path, env={})) == [
        {"encoder": "tiny", "criteria_formulation": "multilabel", "long_text": "truncate"},
        {"encoder": "tiny", "criteria_formulation": "multilabel", "long_text": "chunks"},
        {"encoder": "tiny", "criteria_formulation": "pairs"},
    ]


def test_a_step_timing_counts_the_tokens_an_epoch_reads(tiny_roberta, tmp_path):
    from hpo.train.config import TrainConfig
    from hpo.train.prepare import prepare_data
    from hpo.train.setup import time_steps

    config = TrainConfig(
        task="criteria",
        encoder=str(tiny_roberta),
        data_dir=str(write_sample(tmp_path / "data", posts=30, seed=0)),
        batch_size=4,
        max_length=64,
        device="cpu",
        mixed_precision="no",
    )
    timing = time_steps(config, steps=2)
    train = prepare_data(config).train
    assert timing.timed_steps == 2 and timing.seconds_per_token > 0
    assert timing.steps_per_epoch == -(-len(train) // 4)
    assert timing.train_tokens_per_epoch == int(train.tokens.lengths.sum())
    assert timing.validation_tokens == int(prepare_data(config).validation.tokens.lengths.sum())


# ---- the top level -------------------------------------------------------------------------------


def test_version_names_the_installed_package(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"hpo {version('hpo')}"


def test_top_level_help_speaks_to_users(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "hpo validate" in out and "hpo finalize" in out and "parses arguments" not in out


# ---- status without a study: the storage's studies -----------------------------------------------


def test_status_without_a_study_lists_the_storages_studies(
    capsys, storage_url, study_name, tmp_path
):
    build_study(storage_url, study_name, tmp_path, n_trials=10)
    empty = optuna.create_study(study_name=f"{study_name}-empty", storage=get_storage(storage_url))
    code, out, err = hpo(capsys, "status", "--storage", storage_url)
    assert (code, err) == (0, "")
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines[study_name].split() == [
        study_name,
        *("complete=3", "pruned=1", "failed=0", "running=0", "waiting=0"),
        *("best", "0.8700"),
    ]
    assert lines[empty.study_name].split()[1:] == [
        *("complete=0", "pruned=0", "failed=0", "running=0", "waiting=0"),
        *("best", "-"),
    ]


def test_status_without_a_study_on_a_missing_database_creates_nothing(capsys, tmp_path):
    missing = tmp_path / "nothing-here.db"
    code, out, err = hpo(capsys, "status", "--storage", f"sqlite:///{missing}")
    assert (code, out, err) == (0, f"no studies in sqlite:///{missing}\n", "")
    assert not missing.exists()


# ---- one log format ------------------------------------------------------------------------------

HPO_LOG_LINE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[hpo\] "


def test_optunas_own_lines_come_in_hpos_log_format(capsys, conditional, sqlite_url, study_name):
    argv = ("enqueue", str(conditional), "--set", "adapter=full", "--storage", sqlite_url)
    code, _, err = hpo(capsys, *argv)  # creates the study: Optuna says so
    assert code == 0, err
    created = f"A new study created in RDB with name: {study_name}"
    assert (
        [line for line in err.splitlines() if created in line]
        == [
            line
            for line in err.splitlines()
            if re.fullmatch(HPO_LOG_LINE + re.escape(created), line)
        ]
        != []
    ), err
    assert not re.search(r"^\[[IWE] ", err, re.MULTILINE), "nothing in Optuna's own format"


def test_a_library_warning_during_a_command_comes_in_hpos_log_format(
    capsys, monkeypatch, sqlite_url
):
    from hpo.study import study_summaries

    def warns(url):  # what transformers and torch do from deep inside a command
        warnings.warn("this argument is deprecated", FutureWarning, stacklevel=1)
        return study_summaries(url)

    monkeypatch.setattr("hpo.study.study_summaries", warns)
    code, _, err = hpo(capsys, "status", "--storage", sqlite_url)
    assert code == 0
    assert re.fullmatch(
        HPO_LOG_LINE + r".*FutureWarning: this argument is deprecated", err.splitlines()[0]
    )


def test_known_harmless_library_warnings_are_silenced(capsys, sqlite_url, tiny_roberta):
    import peft
    from transformers import AutoModel

    hpo(capsys, "status", "--storage", sqlite_url)  # any command sets the filters up
    encoder = AutoModel.from_pretrained(tiny_roberta)
    with warnings.catch_warnings(record=True) as caught:
        # peft asks for transformers 5's deprecated is_gradient_checkpointing
        peft.get_peft_model(encoder, peft.LoraConfig(r=4, target_modules=["query", "value"]))
    assert [w for w in caught if issubclass(w.category, FutureWarning)] == []
