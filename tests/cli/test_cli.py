"""The CLI's own edges: a path it cannot write, or a flag out of range, is one line and exit 2."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import optuna
import pytest

from hpo.cli import main
from hpo.study.storage import get_storage
from tests.support import REPO
from tests.support.cli_studies import build_study
from tests.support.helpers import free_port, hpo, hpo_argv, run_hpo

UNWRITABLE = "/proc/hpo-cannot-write-here"  # not even root can create files in /proc


def assert_one_line_exit_2(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, (
        result.stderr
    )
    for text in expected:
        assert text in result.stderr


@pytest.fixture
def finished_study(sqlite_url, study_name) -> str:
    study = optuna.create_study(study_name=study_name, storage=get_storage(sqlite_url))
    for value in (0.3, 0.5, 0.4):
        trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
        trial.report(value, 1)
        study.tell(trial, value)
    return study_name


@pytest.mark.slow
def test_export_to_an_unwritable_path(sqlite_url, finished_study):
    result = run_hpo(
        "export", finished_study, "--storage", sqlite_url, "--out", f"{UNWRITABLE}/trials.csv"
    )
    assert_one_line_exit_2(result, "cannot write", "trials.csv")


@pytest.mark.slow
def test_report_to_an_unwritable_path(sqlite_url, finished_study):
    assert_one_line_exit_2(
        run_hpo("report", finished_study, "--storage", sqlite_url, "--out", UNWRITABLE),
        "cannot write the report",
        UNWRITABLE,
    )


def test_a_reader_that_stops_early_gets_no_error(sqlite_url, finished_study):
    """`hpo status | head -1` printed "hpo: error: Broken pipe; check the path and its
    permissions": the reader closing the pipe is not the user's error. Exit 141, as a shell
    reports a writer that a closed pipe stopped, and nothing on stderr."""
    reader_gone = subprocess.Popen(
        hpo_argv("status", finished_study, "--storage", sqlite_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reader_gone.stdout.close()  # before the child has written: its first write finds no reader
    stderr = reader_gone.stderr.read()
    assert reader_gone.wait(timeout=300) == 141, stderr
    assert stderr == ""


@pytest.mark.parametrize("command", [("data", "sample"), ("make-tiny-encoder",)])
@pytest.mark.slow
def test_fixture_builders_to_an_unwritable_path(command):
    assert_one_line_exit_2(run_hpo(*command, UNWRITABLE), UNWRITABLE, "permissions")


def test_a_sample_too_large_to_build_is_refused_before_it_grows():
    """Issue #55: --posts 1000000000000 grew ~40 MB/s until killed; now one line, exit 2."""
    assert_one_line_exit_2(
        run_hpo("data", "sample", "unused-out", "--posts", "1000000000000"),
        "at most 150000 (the real ReDSM5 has 1484), got 1000000000000",
    )


@pytest.mark.parametrize("flag", ["--sweep-seconds", "--max-trial-seconds"])
@pytest.mark.parametrize("value", ["inf", "nan", "-5", "1e12"])
def test_storage_proxy_seconds_out_of_range_are_one_line(flag, value):
    """Issue #55 item 10: --sweep-seconds inf tracebacked in the sweep thread."""
    assert_one_line_exit_2(
        run_hpo("storage-proxy", flag, value), "must be seconds from 0 to 604800 (a week), got "
    )


@pytest.mark.parametrize("command", ["dashboard", "storage-proxy"])
def test_a_port_out_of_range(command):
    assert_one_line_exit_2(
        run_hpo(command, "--port", "99999"), "must be a port number 1-65535, got 99999"
    )


@pytest.mark.slow
def test_an_encoder_the_hub_cannot_serve_is_refused_before_any_study(tmp_path, tiny_roberta):
    """Fetched once in the launcher: a worker would otherwise fail every trial after a long
    wait. Here the hub is unreachable (or the id unknown): one line, exit 2, no study."""
    import os

    from hpo.fixtures import write_sample

    data = write_sample(tmp_path / "data", posts=20, seed=0)
    spec = REPO / "studies" / "criteria-smoke.yaml"
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HPO_STORAGE")}
    env["HF_HOME"] = str(tmp_path / "hf")  # an empty cache: nothing to fall back on
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpo",
            "tune",
            str(spec),
            "--storage",
            f"sqlite:///{tmp_path / 'hpo.db'}",
            "--set",
            f"data_dir={data}",
            "--set",
            f"output_dir={tmp_path / 'out'}",
            "--set",
            "model_paths.tiny-roberta=no-such-org/no-such-encoder-xyz",
            "--set",
            f"model_paths.tiny-deberta={tiny_roberta}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert_one_line_exit_2(
        result,
        "encoder 'tiny-roberta': cannot download no-such-org/no-such-encoder-xyz",
        "--set model_paths.tiny-roberta=/path/to/model",
    )
    assert not (tmp_path / "hpo.db").exists()


def database_intact(url: str, study_name: str) -> bool:
    return len(optuna.load_study(study_name=study_name, storage=get_storage(url)).trials) == 3


@pytest.mark.slow
def test_export_never_overwrites_the_study_database(sqlite_url, finished_study, tmp_path):
    """``--out`` naming the storage file used to exit 0 with the database destroyed."""
    database = sqlite_url.removeprefix("sqlite:///")
    spare = tmp_path / "other.db"
    spare.write_bytes(Path(database).read_bytes())  # any SQLite file, not only this study's storage
    for out in (database, str(spare), f"{database}-journal"):
        Path(f"{database}-journal").unlink(missing_ok=True)
        for fmt in ("csv", "json"):
            result = run_hpo(
                "export", finished_study, "--storage", sqlite_url, "--format", fmt, "--out", out
            )
            assert_one_line_exit_2(result, "SQLite database", out)
    assert database_intact(sqlite_url, finished_study) and database_intact(
        f"sqlite:///{spare}", finished_study
    )


@pytest.mark.slow
def test_export_never_overwrites_the_study_file_it_reads(sqlite_url, finished_study, tmp_path):
    spec = tmp_path / "study.yaml"
    text = (
        f"name: {finished_study}\ntask: criteria\ndata_dir: data\nn_trials: 3\n"
        "train: {encoder: tiny}\n"
        "search_space:\n  learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}\n"
    )
    spec.write_text(text)
    result = run_hpo("export", str(spec), "--storage", sqlite_url, "--out", str(spec))
    assert_one_line_exit_2(result, "is the study file")
    assert spec.read_text() == text


@pytest.mark.slow
def test_report_never_overwrites_a_database(sqlite_url, finished_study, tmp_path):
    """Every file the report writes goes through the same rule, checked before any is drawn."""
    database = Path(sqlite_url.removeprefix("sqlite:///"))
    for name in ("summary.md", "parallel_coordinate.png"):
        out = tmp_path / name.split(".")[0]
        out.mkdir()
        shutil.copy(database, out / name)
        result = run_hpo("report", finished_study, "--storage", sqlite_url, "--out", str(out))
        assert_one_line_exit_2(result, "SQLite database", name)
        assert database_intact(f"sqlite:///{out / name}", finished_study)
        assert [p.name for p in out.iterdir()] == [name], "nothing drawn"


@pytest.mark.slow
def test_dashboard_on_a_busy_port_names_it_before_saying_it_listens(sqlite_url, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_hpo(
            "dashboard",
            "--storage",
            sqlite_url,
            "--port",
            str(port),
            "--artifact-dir",
            str(tmp_path / "artifacts"),
        )
    assert_one_line_exit_2(result, f"port {port} on 127.0.0.1 is busy", "--port")
    assert "optuna-dashboard for" not in result.stdout and "Listening" not in result.stderr
    assert not (tmp_path / "hpo.db").exists() and not (tmp_path / "artifacts").exists(), (
        "nothing created"
    )


@pytest.mark.slow
def test_dashboard_on_a_database_file_that_does_not_exist_refuses_and_creates_nothing(tmp_path):
    """A mistyped --storage path served an empty dashboard, and left an empty database file
    where the typo pointed."""
    missing = tmp_path / "typo.db"
    result = run_hpo(
        "dashboard",
        "--storage",
        f"sqlite:///{missing}",
        "--port",
        str(free_port()),
        "--artifact-dir",
        str(tmp_path / "artifacts"),
    )
    assert_one_line_exit_2(result, f"no database at sqlite:///{missing}", "hpo tune creates it")
    assert "optuna-dashboard for" not in result.stdout
    assert not missing.exists() and not (tmp_path / "artifacts").exists(), "nothing created"


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("192.0.2.1", "not an address of this machine"),
        ("no-such-host.invalid", "unknown host name"),
    ],
)
def test_dashboard_on_a_host_it_cannot_bind_names_it(sqlite_url, tmp_path, host, expected):
    result = run_hpo(
        "dashboard",
        "--storage",
        sqlite_url,
        "--host",
        host,
        "--port",
        "8080",
        "--artifact-dir",
        str(tmp_path / "artifacts"),
    )
    assert_one_line_exit_2(result, f"cannot listen on host {host}", expected, "--host 127.0.0.1")
    assert "optuna-dashboard for" not in result.stdout


SMOKE = str(REPO / "studies" / "criteria-smoke.yaml")


@pytest.mark.parametrize("command", ["tune", "worker", "validate", "finalize", "predict"])
def test_more_threads_than_the_machine_has_cpus_is_refused_before_anything_exists(
    tmp_path, command
):
    """finalize and predict take --threads too (issue #48 item 2), read as tune reads it."""
    database = tmp_path / "hpo.db"
    result = run_hpo(command, SMOKE, "--threads", "100000", "--storage", f"sqlite:///{database}")
    assert_one_line_exit_2(result, "--threads", f"at most {os.cpu_count()}", "got 100000")
    assert not database.exists(), "no study was created"


def test_a_worker_whose_parent_process_does_not_exist_says_so(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its PID now names no process
    database = tmp_path / "hpo.db"
    result = run_hpo(
        "worker", SMOKE, "--parent-pid", str(gone.pid), "--storage", f"sqlite:///{database}"
    )
    assert_one_line_exit_2(result, f"--parent-pid {gone.pid}: no such process")
    assert not database.exists(), "no study was created"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--timeout", "inf"), "argument --timeout: must be a finite number up to 8760h"),
        (("--timeout", "1e400"), "argument --timeout: must be a finite number up to 8760h"),
        (("--memory-per-worker", "inf"), "argument --memory-per-worker: must be a finite number"),
        (("--set", "timeout=1e400"), "timeout: Input should be a finite number"),
        (("--set", "timeout=1e300"), "timeout: Input should be less than or equal to 31536000"),
    ],
)
def test_an_infinite_duration_or_size_is_one_line_exit_2_and_no_study(args, said, tmp_path, capsys):
    """Issue #34 item 6: --timeout inf / 1e400 (and `timeout: 1e400` in a spec) created the
    study, then ended in an OverflowError; --memory-per-worker inf was an OverflowError."""
    from hpo.cli import main

    database = tmp_path / "hpo.db"
    argv = ["tune", str(REPO / "studies" / "criteria-smoke.yaml"), "--no-progress", *args]
    argv += ["--storage", f"sqlite:///{database}"]
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's own refusal
        code = exit.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and said in err, err
    assert not database.exists(), "no study, not even a database"


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


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["tune", "x.yaml", "--timeout", "-5m"], "--timeout: must be at least 1s, got '-5m'"),
        (["tune", "x.yaml", "--memory-per-worker", "-6G"], "--memory-per-worker: must be at least"),
        (["tune", "x.yaml", "--storage", "--workers", "2"], "--storage: expected one argument"),
    ],
)
def test_a_dashed_value_is_checked_as_a_value_and_a_flag_is_never_one(capsys, argv, problem):
    """`--timeout -5m` said only "expected one argument": argparse reads -5m as a flag. The value
    now meets its own check; a real flag after a flag still reads as a missing value."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    stderr = capsys.readouterr().err
    assert exited.value.code == 2 and len(stderr.strip().splitlines()) == 1
    assert problem in stderr


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["dashboard", "s", "--port", "abc"], "--port: must be a port number 1-65535, got 'abc'"),
        (
            ["tune", "x.yaml", "--workers", "two"],
            "--workers: must be a positive integer, got 'two'",
        ),
        (["predict", "m", "--input", "x", "--out", "y.csv", "--top-k", "x"], "must be 0 or more"),
    ],
)
def test_a_number_flag_given_words_says_what_it_takes(capsys, argv, problem):
    """`--port abc` said "invalid _port value: 'abc'", the name of the checking function."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    stderr = capsys.readouterr().err
    assert exited.value.code == 2 and len(stderr.strip().splitlines()) == 1
    assert problem in stderr and "invalid _" not in stderr
