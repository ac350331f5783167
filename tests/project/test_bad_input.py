"""Bad input gets a clear error and loses nothing.

Every case runs the real CLI (``hpo tune --workers 2`` in a child process, and ``hpo validate``
where it applies, through the same ``main`` in this one) on a copy of
``studies/evidence-smoke.yaml`` with exactly one thing wrong: it must exit 2 with one line on
stderr naming the problem (and the fix, where there is one), no traceback, nothing on stdout,
and no study created in SQLite or PostgreSQL.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
import yaml

from hpo.cli import main
from hpo.data import ANNOTATIONS_FILE, POSTS_FILE
from hpo.fixtures import write_sample
from tests.support import REPO

SMOKE = REPO / "studies" / "evidence-smoke.yaml"


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta) -> dict[str, Path]:
    """Good sample data plus one broken copy per data case; good encoders."""
    root = tmp_path_factory.mktemp("bad-input")
    good = write_sample(root / "data", posts=30, seed=0)
    broken = {name: root / name for name in ("no-text-column", "unknown-label", "header-only")}
    for path in broken.values():
        shutil.copytree(good, path)
    posts = _read_csv(good / POSTS_FILE)
    _write_csv(broken["no-text-column"] / POSTS_FILE, [["post_id", "body"], *posts[1:]])
    annotations = _read_csv(good / ANNOTATIONS_FILE)
    annotations[3][annotations[0].index("DSM5_symptom")] = "MOODINESS"  # line 4 of the file
    _write_csv(broken["unknown-label"] / ANNOTATIONS_FILE, annotations)
    _write_csv(broken["header-only"] / POSTS_FILE, posts[:1])
    _write_csv(broken["header-only"] / ANNOTATIONS_FILE, annotations[:1])
    one_post = root / "one-post"
    one_post.mkdir()
    first = posts[1][0]
    _write_csv(one_post / POSTS_FILE, posts[:2])
    _write_csv(
        one_post / ANNOTATIONS_FILE,
        [annotations[0], *(row for row in annotations[1:] if row[0] == first)],
    )
    (root / "a-file").write_text("not a folder\n")
    return {
        "root": root,
        "data": good,
        **broken,
        "one-post": one_post,
        "roberta": tiny_roberta,
        "deberta": tiny_deberta,
    }


def _read_csv(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _write_csv(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)


def _good_spec(assets: dict[str, Path], name: str, tmp_path: Path) -> dict:
    """The smoke spec made runnable here: only what a case breaks is wrong."""
    spec = yaml.safe_load(SMOKE.read_text())
    spec.update(name=name, data_dir=str(assets["data"]), output_dir=str(tmp_path / "out"))
    spec["model_paths"] = {
        "tiny-roberta": str(assets["roberta"]),
        "tiny-deberta": str(assets["deberta"]),
    }
    spec["train"]["cache_dir"] = str(tmp_path / "cache")
    return spec


def _break_yaml_line(spec: dict) -> tuple[str, int]:
    """The spec as YAML text with a mapping-in-a-scalar on the ``metric:`` line."""
    lines = yaml.safe_dump(spec, sort_keys=False).splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("metric:"))
    lines[index] = "metric: macro_f1: oops"
    return "\n".join(lines) + "\n", index + 1


@dataclass(frozen=True)
class Case:
    id: str
    expect: tuple[str, ...]  # substrings of the one error line: what is wrong, and the fix
    edit: Callable[[dict, dict], None] | None = None  # (spec, assets) -> None, edits the spec
    args: tuple[str, ...] = ()
    storage: str | None = None  # None: sqlite in tmp_path
    # also `hpo validate` (it connects to the storage read-only, and takes no --workers)
    validate: bool = True
    postgres: bool = False  # the study must also be absent from the real PostgreSQL
    secret: str | None = None  # must never be echoed
    spec_file: bool = True  # False: the spec file does not exist
    malformed_yaml: bool = False


def _ss(name: str, **values) -> Callable[[dict, dict], None]:
    return lambda spec, _: spec["search_space"][name].update(values)


def _data(which: str) -> Callable[[dict, dict], None]:
    return lambda spec, assets: spec.update(data_dir=str(assets[which]))


CASES = [
    Case("malformed-yaml", ("invalid YAML", "mapping values are not allowed"), malformed_yaml=True),
    Case(
        "unknown-top-level-key",
        ("bogus_key: unknown key",),
        edit=lambda spec, _: spec.update(bogus_key=1),
    ),
    Case(
        "unknown-key-in-distribution",
        ("search_space.learning_rate.lowest: unknown key",),
        edit=_ss("learning_rate", lowest=1e-4),
    ),
    Case(
        "low-above-high",
        ("search_space.learning_rate.low: must be less than high", "0.01 > 0.001"),
        edit=_ss("learning_rate", low=1e-2, high=1e-3),
    ),
    Case(
        "log-range-low-not-positive",
        ("search_space.head_dropout.low: must be > 0 with log: true",),
        edit=_ss("head_dropout", log=True),
    ),
    Case(
        "empty-choices",
        ("search_space.pooling.choices: must list at least one choice",),
        edit=_ss("pooling", choices=[]),
    ),
    Case(
        "unknown-parameter",
        ("search_space.learning_rat: is not a TrainConfig setting", "did you mean 'learning_rate'"),
        edit=lambda spec, _: spec["search_space"].update(
            learning_rat=spec["search_space"].pop("learning_rate")
        ),
    ),
    Case(
        "unknown-task",
        ("task:", "'criteria' or 'evidence'", "'sentiment'"),
        edit=lambda spec, _: spec.update(task="sentiment"),
    ),
    Case(
        "missing-data-directory",
        ("no-such-data: data directory not found", f"holds {POSTS_FILE} and {ANNOTATIONS_FILE}"),
        edit=lambda spec, assets: spec.update(data_dir=str(assets["root"] / "no-such-data")),
    ),
    Case(
        "missing-csv-column",
        (
            f"no-text-column/{POSTS_FILE}: line 1: missing column(s) text",
            "the header must include post_id, text",
        ),
        edit=_data("no-text-column"),
    ),
    Case(
        "unknown-symptom-label",
        (
            ANNOTATIONS_FILE,
            "unknown DSM5_symptom label(s) 'MOODINESS' (line 4)",
            "use one of DEPRESSED_MOOD",
        ),
        edit=_data("unknown-label"),
    ),
    Case(
        "empty-dataset",
        (f"header-only/{POSTS_FILE}", "header only, no data rows", "add at least one row"),
        edit=_data("header-only"),
    ),
    Case(
        "invalid-storage-url",
        ("'nonsense://'", "only sqlite, postgresql and grpc"),
        storage="nonsense://",
        validate=False,
    ),
    Case(
        "unreachable-database",
        (
            "cannot use the database at postgresql+psycopg2://postgres@127.0.0.1:1/x",
            "Connection refused",
            "Check that it is running",
        ),
        storage="postgresql+psycopg2://postgres@127.0.0.1:1/x",
        postgres=True,
    ),
    # The local server trusts every connection, so any password is accepted for a real role:
    # a role that does not exist is how wrong credentials look here.
    Case(
        "wrong-credentials",
        (
            "no_such_role:***@127.0.0.1:5432/hpo_test",
            'role "no_such_role" does not exist',
            "URL (user, password, host, database)",
        ),
        storage="postgresql+psycopg2://no_such_role:pw@127.0.0.1:5432/hpo_test",
        postgres=True,
        secret="pw",
    ),
    Case(
        "storage-proxy-not-listening",
        ("no storage proxy answers at grpc://127.0.0.1:1", "start one with `hpo storage-proxy"),
        storage="grpc://127.0.0.1:1",
    ),
    Case(
        "sqlite-file-cannot-be-created",
        (
            "cannot use the database at sqlite:////proc/hpo-test.db",
            "cannot create /proc/hpo-test.db",
            "point --storage at a writable folder",
        ),
        storage="sqlite:////proc/hpo-test.db",
    ),
    Case(
        "set-without-equals",
        ("override 'nokeyvalue': expected the form key=value", "e.g. train.epochs=2"),
        args=("--set", "nokeyvalue"),
    ),
    Case(
        "set-zero-trials",
        ("n_trials: Input should be greater than or equal to 1", "(got 0)"),
        args=("--set", "n_trials=0"),
    ),
    Case(
        "zero-workers",
        ("hpo tune: error: argument --workers: must be a positive integer, got 0",),
        args=("--workers", "0"),
        validate=False,
    ),
    Case("missing-spec-file", ("no such study file",), spec_file=False),
    # What only a run would have rejected (the trials failed, and the study existed already):
    Case(
        "one-post-dataset",
        ("the validation split is empty (1 posts", "use more posts"),
        edit=_data("one-post"),
    ),
    Case(
        "max-length-too-short",
        (
            "encoder 'tiny-",
            "max_length=8 leaves no room for the post",
            "Raise max_length to at least",
        ),
        args=("--set", "train.max_length=8"),
    ),
    Case(
        "split-fractions-out-of-range",
        ("split fractions",),
        args=("--set", "train.split_fractions=[-1,2,0]"),
    ),
    Case(
        "unknown-device",
        ("train.device='bogus' is not a device", "use auto, cpu, cuda or cuda:N"),
        args=("--set", "train.device=bogus"),
    ),
    # Validate refuses what every trial would fail on (issue #34 item 3, #35 item 2):
    *(
        Case(
            f"device-{device}",
            (f"train.device='{device}'", "CPU or CUDA GPUs only", "use auto, cpu, cuda or cuda:N"),
            args=("--set", f"train.device={device}"),
        )
        for device in ("mps", "meta", "xla")
    ),
    Case(
        "max-length-past-the-encoder-positions",
        (
            "train.max_length: max_length=2048 but encoder 'tiny-roberta' has 512 positions",
            "use at most 512",
        ),
        args=("--set", "train.max_length=2048"),
    ),
    Case(
        "searched-max-length-past-the-encoder-positions",
        ("search_space.max_length: max_length=1024 but encoder 'tiny-roberta' has 512 positions",),
        edit=lambda spec, _: spec["search_space"].update(
            max_length={"type": "int", "low": 64, "high": spec["train"].pop("max_length") * 16}
        ),
    ),
    Case(
        "freeze-layers-past-the-encoder-depth",
        ("train.freeze_layers: freeze_layers=3 but encoder 'tiny-", "has 2 layers; use at most 2"),
        args=("--set", "train.freeze_layers=3"),
    ),
    Case(
        "searched-freeze-layers-past-the-encoder-depth",
        ("search_space.freeze_layers: freeze_layers=4 but encoder 'tiny-", "has 2 layers"),
        args=("--set", "search_space.freeze_layers={type: int, low: 0, high: 4}"),
    ),
    Case(
        "study-name-too-long-for-a-file-name",
        ("name: is 250 characters long; give at most 128",),
        args=("--set", f"name={'a' * 250}"),
    ),
    *(
        Case(
            f"boolean-trial-count-{word}",
            ("n_trials: must be a number, not a boolean (got true",),
            args=("--set", f"n_trials={word}"),
        )
        for word in ("true", "yes")
    ),
    # issue #48, item 19: a number past any budget is a typo, not days of trials
    Case(
        "trials-past-any-budget",
        ("n_trials: Input should be less than or equal to 100000 (got 99999999999999999999)",),
        args=("--set", "n_trials=99999999999999999999"),
    ),
    Case(
        "epochs-past-any-training",
        ("train.epochs: must be at most 1000 (got 1000000000)",),
        args=("--set", "train.epochs=1e9"),
    ),
    # issue #51, item 2: one of them silently won
    Case(
        "two-time-budgets",
        ("--timeout and --set timeout= both set the time budget; give one of them",),
        args=("--timeout", "2h", "--set", "timeout=60"),
    ),
    Case(
        "sampler-option-of-the-wrong-type",
        ("sampler.options.n_startup_trials: expected an integer, got 'abc'",),
        args=("--set", "sampler.options.n_startup_trials=abc"),
    ),
    Case(
        "output-dir-is-a-file",
        ("output_dir", "a-file", "point output_dir at a writable folder"),
        edit=lambda spec, assets: spec.update(output_dir=str(assets["root"] / "a-file")),
    ),
    Case(
        "output-dir-cannot-be-created",
        ("output_dir /proc/hpo-out", "point output_dir at a writable folder"),
        edit=lambda spec, _: spec.update(output_dir="/proc/hpo-out"),
    ),
    Case("dots-only-study-name", ("name:",), edit=lambda spec, _: spec.update(name="..")),
    Case(
        "missing-encoder-path",
        (
            "encoder 'tiny-roberta': /nonexistent does not exist",
            "use --set model_paths.tiny-roberta=/path/to/model",
        ),
        args=("--set", "model_paths.tiny-roberta=/nonexistent"),
    ),
]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HPO_STORAGE"}
    return {**env, "HF_HUB_OFFLINE": "1"}


def _run_together(
    commands: list[list[str]], cwd: Path, meanwhile: Callable[[], object] = lambda: None
) -> list[subprocess.CompletedProcess]:
    """Start every command at once (each fails within about a second), call ``meanwhile``,
    then collect them."""
    procs = [
        subprocess.Popen(
            cmd, cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for cmd in commands
    ]
    meanwhile()
    results = []
    for cmd, proc in zip(commands, procs, strict=True):
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results.append(subprocess.CompletedProcess(cmd, proc.returncode, out, err))
    return results


def _in_process(argv: list[str], capfd) -> subprocess.CompletedProcess:
    """``hpo ARGV`` through the CLI's ``main`` here, as ``_run_together`` reports a child: torch,
    transformers and sklearn are loaded here already, where a child spends seconds importing
    them (hpo tune's child still takes the path from a fresh interpreter)."""
    capfd.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusals
        code = exc.code
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess([sys.executable, "-m", "hpo", *argv], code, out, err)


def _workers_of(spec_path: Path) -> list[str]:
    """Command lines of live `hpo worker` processes of ``spec_path`` (Linux: /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:  # ended meanwhile
            continue
        if "worker" in args and str(spec_path) in args:
            found.append(" ".join(args))
    return found


def _studies_in(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table("studies"):
                return set()
            return set(conn.execute(sa.text("SELECT study_name FROM studies")).scalars())
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, id=case.id, marks=pytest.mark.postgres if case.postgres else ())
        for case in CASES
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_clear_line_and_creates_no_study(
    case: Case, assets, tmp_path, study_name, request, monkeypatch, capfd
):
    spec = _good_spec(assets, study_name, tmp_path)
    spec_path = tmp_path / "study.yaml"
    expect = case.expect
    if case.malformed_yaml:
        text, line = _break_yaml_line(spec)
        spec_path.write_text(text)
        expect = (*expect, f"study.yaml: line {line}, column")
    elif case.spec_file:
        if case.edit:
            case.edit(spec, assets)
        spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    else:
        expect = (*expect, str(spec_path))
    db = tmp_path / "hpo.db"
    storage = case.storage or f"sqlite:///{db}"
    common = [str(spec_path), "--storage", storage]
    commands = [
        [
            sys.executable,
            "-m",
            "hpo",
            "tune",
            *common,
            "--workers",
            "2",
            "--no-progress",
            *case.args,
        ]
    ]
    monkeypatch.chdir(tmp_path)  # where the child runs, in its environment (_env)
    monkeypatch.delenv("HPO_STORAGE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    validated: list[subprocess.CompletedProcess] = []

    def validate() -> None:
        if case.validate:
            validated.append(_in_process(["validate", *common, *case.args], capfd))

    for run in [*_run_together(commands, cwd=tmp_path, meanwhile=validate), *validated]:
        what = " ".join(run.args[2:4])
        assert run.returncode == 2, (
            f"{what}: exit {run.returncode}\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
        )
        assert "Traceback" not in run.stderr, run.stderr
        lines = run.stderr.splitlines()
        assert len(lines) == 1 and lines[0].strip(), (
            f"{what}: stderr must be one line: {run.stderr!r}"
        )
        assert lines[0].startswith(("hpo: error: ", "hpo tune: error: ")), lines[0]
        for part in expect:
            assert part in lines[0], f"{what}: {part!r} not in {lines[0]!r}"
        assert run.stdout == "", f"{what}: nothing may run before the error: {run.stdout!r}"
        if case.secret:
            assert case.secret not in run.stderr and case.secret not in run.stdout, run.stderr

    assert not _workers_of(spec_path), "the workers tune started before its checks ended with it"
    assert not db.exists() or study_name not in {
        s.study_name for s in optuna.get_all_study_summaries(f"sqlite:///{db}")
    }
    if case.postgres:
        assert study_name not in _studies_in(request.getfixturevalue("postgres_url"))


@pytest.mark.slow
def test_the_unbroken_spec_is_valid(assets, tmp_path, study_name):
    """The control: without the one broken thing, the same spec, data and encoders pass."""
    spec_path = tmp_path / "study.yaml"
    spec_path.write_text(yaml.safe_dump(_good_spec(assets, study_name, tmp_path), sort_keys=False))
    [run] = _run_together(
        [
            [
                sys.executable,
                "-m",
                "hpo",
                "validate",
                str(spec_path),
                "--storage",
                f"sqlite:///{tmp_path / 'hpo.db'}",
            ]
        ],
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert f"valid — study {study_name!r}" in run.stdout
    assert not (tmp_path / "hpo.db").exists(), "validate creates nothing"
