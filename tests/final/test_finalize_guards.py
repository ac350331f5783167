"""hpo finalize under hostile use: killed mid-retraining, run twice at once, run on a search
that is not over, on other data, after its model was deleted, on a spec without a test split.

The studies here are made as ``hpo tune`` makes them (``open_study``), with trials asked
and told made-up values: finalize's own retrainings are real (tiny encoders, sample data).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import psutil
import pytest

from hpo.cli import main
from hpo.errors import StudyBusy
from hpo.fixtures import write_sample
from hpo.spec import load_spec
from hpo.study import open_study
from hpo.study.records import study_uid
from hpo.study.search import start_time_budget, suggest
from hpo.study.storage import get_storage, study_lock
from tests.support import REPO
from tests.support.shared_storage import edit_recorded_spec, write_recorded_spec

SPEC = str(REPO / "studies" / "criteria-smoke.yaml")


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("finalize-guards")
    return {
        "data": write_sample(root / "data", posts=60, seed=2),
        "cache": root / "cache",
        "roberta": tiny_roberta,
        "deberta": tiny_deberta,
    }


def searched(
    tmp_path: Path,
    assets,
    storage: str,
    name: str,
    *,
    finished: int = 4,
    running: int = 0,
    settings: tuple[str, ...] = (),
) -> list[str]:
    """A study as ``hpo tune`` leaves it, without its training: ``finished`` trials told a
    value, ``running`` asked and never told. Returns the ``--set`` flags that describe it."""
    settings = (
        f"name={name}",
        f"data_dir={assets['data']}",
        f"output_dir={tmp_path / 'out'}",
        f"train.cache_dir={assets['cache']}",
        "n_trials=4",
        "train.epochs=1",
        f"model_paths.tiny-roberta={assets['roberta']}",
        f"model_paths.tiny-deberta={assets['deberta']}",
        *settings,
    )
    spec = load_spec(SPEC, settings, storage)
    study = open_study(spec)
    for index in range(finished):
        trial = study.ask()
        suggest(trial, spec)
        study.tell(trial, 0.5 + index / 100)
    for _ in range(running):
        suggest(study.ask(), spec)
    return [arg for setting in settings for arg in ("--set", setting)]


def final_dir(tmp_path: Path, storage: str, args: list[str]) -> Path:
    spec = load_spec(SPEC, args[1::2], storage)
    return spec.study_dir(study_uid(open_study(spec))) / "final"


def finalize_argv(storage: str, args: list[str], *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hpo",
        "finalize",
        SPEC,
        "--storage",
        storage,
        "--no-progress",
        *args,
        *extra,
    ]


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=cwd)


def here(capfd, *argv: str) -> subprocess.CompletedProcess:
    """``hpo ARGV`` through the CLI's ``main`` in this process, reported as ``run`` reports a
    child: for a refusal that comes before any work, without a child's seconds of imports."""
    capfd.readouterr()
    code = main(list(argv))
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(["hpo", *argv], code, out, err)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _results(runs: Path) -> dict[Path, int]:
    return {path: path.stat().st_mtime_ns for path in runs.glob("*/result.json")}


@pytest.mark.slow
def test_a_stopped_or_killed_finalize_leaves_no_process_behind_and_a_rerun_resumes(
    tmp_path, assets
):
    """SIGTERM, then kill -9, of ``finalize --workers 2`` mid-retraining: every process it
    started ends with it (none lives on with PPID 1 writing results), the retrainings that
    finished are kept, and a rerun trains only the others."""
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    args = searched(tmp_path, assets, storage, "orphans")
    argv = finalize_argv(storage, args, "--top-k", "2", "--seeds", "3", "--workers", "2")
    runs = final_dir(tmp_path, storage, args) / "runs"
    for stop in (signal.SIGTERM, signal.SIGKILL):
        before = len(_results(runs))
        # a file: a pipe would stay open as long as any orphan lives
        log, said = tmp_path / f"finalize-{stop.name}.log", tmp_path / f"finalize-{stop.name}.out"
        with log.open("w") as stream, said.open("w") as out:
            process = subprocess.Popen(argv, cwd=tmp_path, stdout=out, stderr=stream)
        descendants: list[psutil.Process] = []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:
            descendants = psutil.Process(process.pid).children(recursive=True)
            if len(_results(runs)) > before and len([p for p in descendants if _alive(p)]) >= 2:
                break
            time.sleep(0.05)
        assert process.poll() is None, log.read_text()[-3000:]
        process.send_signal(stop)
        process.wait(timeout=60)
        err = log.read_text()
        try:
            survivors = []
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and (
                survivors := [p for p in descendants if _alive(p)]
            ):
                time.sleep(0.1)
            assert not survivors, (
                f"left behind after {stop.name}: {[p.cmdline() for p in survivors]}"
            )
        finally:
            for survivor in descendants:
                if _alive(survivor):
                    survivor.kill()
        finished = _results(runs)
        if stop == signal.SIGTERM:  # issue #55 item 10: it exited 130 without a word
            assert process.returncode == 130 and "Traceback" not in err, err[-3000:]
            assert (
                f"interrupted: {len(finished)} of 6 retrainings kept; run hpo finalize again "
                "to resume"
            ) in said.read_text().splitlines(), said.read_text()[-2000:]
        assert before < len(finished) < 6, "stopped after a retraining finished, before the last"
        time.sleep(2)
        assert _results(runs) == finished, "nothing writes results once finalize is gone"

    rerun = run(argv, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"resuming: {len(finished)} of 6 retrainings already finished" in rerun.stdout
    assert {path: path.stat().st_mtime_ns for path in finished} == finished, (
        "finished runs are not retrained"
    )
    assert len(_results(runs)) == 6 and (runs.parent / "metrics.json").exists()


def one_line_error(result: subprocess.CompletedProcess, code: int, *parts: str) -> str:
    assert result.returncode == code, (
        result.returncode,
        result.stdout[-2000:],
        result.stderr[-3000:],
    )
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpo: error: "), result.stderr[-3000:]
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


@pytest.mark.slow
@pytest.mark.postgres
def test_a_second_finalize_of_a_study_exits_at_once_while_the_first_runs(
    tmp_path, assets, postgres_url, study_name
):
    """Two finalizes of one PostgreSQL study (as from two machines): the second exits with one
    line naming the first, scores nothing and writes nothing; the first finishes."""
    args = searched(tmp_path, assets, postgres_url, study_name)
    final = final_dir(tmp_path, postgres_url, args)
    first = subprocess.Popen(
        finalize_argv(postgres_url, args, "--top-k", "1", "--seeds", "2"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while (
            not (final / "runs").exists() and first.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert first.poll() is None, first.communicate()
        second = run(
            finalize_argv(
                postgres_url,
                args,
                "--top-k",
                "1",
                "--seeds",
                "2",
                "--set",
                f"output_dir={tmp_path / 'elsewhere'}",
            ),
            tmp_path,
        )
        one_line_error(
            second,
            1,
            f"study {study_name!r} is being finalized by hpo finalize ",
            f"/{first.pid} (since ",
            "wait for it to end, then run hpo finalize again",
        )
        assert not (tmp_path / "elsewhere").exists(), "the second wrote nothing"
        out, err = first.communicate(timeout=600)
    finally:
        first.kill()
    assert first.returncode == 0, err[-3000:]
    assert "chose trial" in out and (final / "metrics.json").exists()


@pytest.mark.parametrize(
    "storage", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_the_finalize_lock_is_exclusive_and_dies_with_its_holder(
    tmp_path, storage, study_name, request
):
    """A held lock refuses a second holder; a holder killed with -9 leaves the study free at
    once."""
    url = (
        f"sqlite:///{tmp_path / 'hpo.db'}"
        if storage == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    study = optuna.create_study(study_name=study_name, storage=get_storage(url))
    with study_lock(study, "finalize", tmp_path):
        with pytest.raises(StudyBusy, match=f"study {study_name!r} is being finalized by "):
            with study_lock(study, "finalize", tmp_path):
                pass
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from pathlib import Path; "
                "from hpo.study.records import load_existing_study\n"
                "from hpo.study.storage import study_lock\n"
                f"with study_lock(load_existing_study({study_name!r}, {url!r}), 'finalize', "
                f"Path({str(tmp_path)!r})):\n"
                "    print('locked', flush=True); time.sleep(600)"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(StudyBusy):
            with study_lock(study, "finalize", tmp_path):
                pass
        holder.kill()
        holder.wait()
        deadline = time.monotonic() + 10
        while True:
            try:
                with study_lock(study, "finalize", tmp_path):
                    break
            except StudyBusy:
                assert time.monotonic() < deadline, "a killed holder must not keep the study locked"
                time.sleep(0.1)
    finally:
        holder.kill()


@pytest.mark.slow
def test_finalize_refuses_a_search_that_is_still_running_or_short(tmp_path, assets):
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    args = searched(tmp_path, assets, storage, "running", finished=2, running=1)
    result = run(finalize_argv(storage, args), tmp_path)
    one_line_error(
        result,
        2,
        "study 'running' is not finished: 2 of 4 trials finished, 1 running",
        "let hpo tune finish it, or pass --partial",
    )
    assert not final_dir(tmp_path, storage, args).exists(), "nothing retrained"


def test_a_study_without_a_completed_trial_says_so_before_anything_else(tmp_path, assets, capfd):
    """By name it first said output_dir held no folder of the study, then (with --set
    output_dir) to pass --partial, and only then that there was nothing to finalize."""
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    args = searched(tmp_path, assets, storage, "empty", finished=0, running=1)
    said = "study 'empty' has no completed trial to finalize; run hpo tune first"
    for ref in ("empty", SPEC):  # by name, no trial folder made; by file, the search short
        result = here(
            capfd, "finalize", ref, "--storage", storage, *args[: 2 if ref == SPEC else 0]
        )
        assert result.returncode == 2 and result.stderr.strip() == f"hpo: error: {said}", result
    assert not (tmp_path / "out").exists(), "nothing written"


@pytest.mark.slow
def test_a_search_its_time_budget_ended_finalizes_without_partial(tmp_path, assets):
    """`hpo tune --timeout` ends a study short of n_trials; finalizing it needs no --partial,
    and the card says the budget ended it."""
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    args = searched(tmp_path, assets, storage, "budget", finished=2)
    spec = load_spec(SPEC, args[1::2], storage)
    start_time_budget(open_study(spec), -1)  # a deadline that has passed
    result = run(finalize_argv(storage, args, "--top-k", "1", "--seeds", "1"), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    final = final_dir(tmp_path, storage, args)
    summary = json.loads((final / "metrics.json").read_text())
    assert summary["search"] == {
        "n_trials": 4,
        "finished": 2,
        "running": 0,
        "partial": False,
        "ended_by_time_budget": True,
    }
    assert (
        "time budget (`hpo tune --timeout`) ended it after 2 of 4 trials"
        in (final / "model_card.md").read_text()
    )
    chose = next(line for line in result.stdout.splitlines() if "chose trial" in line)
    assert ", one seed); test " in chose and "seeds" not in chose, chose  # not "over 1 seeds"


@pytest.mark.slow
def test_finalize_refuses_data_other_than_the_studys(tmp_path, assets):
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    args = searched(tmp_path, assets, storage, "edited")
    edited = tmp_path / "edited"
    shutil.copytree(assets["data"], edited)
    with (edited / "redsm5_posts.csv").open("a") as stream:
        stream.write("extra-post,one more post that was not there when the study was tuned\n")
    result = run(finalize_argv(storage, args, "--set", f"data_dir={edited}"), tmp_path)
    one_line_error(
        result,
        2,
        "study 'edited' was created from another spec (data: ",
        "finalize by the study's name (hpo finalize edited), or with the spec, --set flags and "
        "data it was tuned with",
    )
    assert not final_dir(tmp_path, storage, args).exists(), "nothing retrained"


def by_name(name: str, storage: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hpo", "finalize", name, "--storage", storage, *extra]


@pytest.mark.slow
def test_an_unreadable_recorded_spec_is_one_line_and_status_still_reads_the_study(
    tmp_path, assets, capfd
):
    """Issue #48 item 15: the study's recorded spec edited in its database into what is no spec
    (not JSON, a string, a list) made `hpo finalize NAME` and `hpo status NAME` tracebacks.
    The commands run in this process (a traceback would fail the test as surely), but for the
    worker: it sets its process's memory ceiling before it reads the study."""
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    sets = searched(tmp_path, assets, storage, "garbled")  # the --set flags
    for value, why in (
        ("{not json", "not valid JSON"),
        ('"a string"', "a JSON str, not a mapping of keys"),
        ("[1, 2]", "a JSON list, not a mapping of keys"),
    ):
        write_recorded_spec("garbled", storage, value)
        one_line_error(
            here(capfd, "finalize", "garbled", "--storage", storage),
            2,
            f"study 'garbled': its recorded spec is unreadable ({why}); pass the study's YAML",
        )
        status = here(capfd, "status", "garbled", "--storage", storage)
        assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
        assert "complete=4" in status.stdout, status.stdout  # it needs no spec to count trials
        # issue #55 item 8: the report, tune and a joining worker printed tracebacks
        said = f"study 'garbled': its recorded spec is unreadable ({why})"
        for argv in (
            ["report", "garbled", "--storage", storage, "--out", str(tmp_path / "r")],
            ["tune", str(SPEC), "--storage", storage, "--no-progress", *sets],
        ):
            one_line_error(here(capfd, *argv), 2, said)
        worker = [sys.executable, "-m", "hpo", "worker", str(SPEC), "--storage", storage, *sets]
        one_line_error(run(worker, tmp_path), 2, said)
    assert not (tmp_path / "out").exists(), "nothing written"


@pytest.mark.slow
def test_an_edited_recorded_name_is_not_blamed_on_a_set_flag(tmp_path, assets):
    """Issue #48 item 16: `name` edited in the recorded spec said "--set name=other-name would
    leave study …; drop that --set" to a user who gave no --set."""
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    searched(tmp_path, assets, storage, "renamed")
    edit_recorded_spec("renamed", storage, name="other-name")
    line = one_line_error(
        run(by_name("renamed", storage), tmp_path),
        2,
        "study 'renamed': its recorded spec names another study ('other-name'), so the record "
        "was edited in the database; pass the study's YAML file instead of its name",
    )
    assert "--set" not in line
    one_line_error(  # where a --set did it, the --set is named
        run(by_name("renamed", storage, "--set", "name=zzz"), tmp_path),
        2,
        "--set name=zzz would leave study 'renamed'; drop that --set",
    )


@pytest.mark.slow
def test_other_data_by_the_studys_name_does_not_say_to_run_the_command_that_was_run(
    tmp_path, assets
):
    """Issue #48 item 16: the recorded data_dir edited to other data, `hpo finalize NAME` said
    to "finalize by the study's name (hpo finalize NAME)": the command that was just run."""
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    # its cache under output_dir: one recorded elsewhere is refused first (issue #55 item 3)
    inside = f"train.cache_dir={tmp_path / 'out' / 'cache'}"
    args = searched(tmp_path, assets, storage, "moved", settings=(inside,))
    final_dir(tmp_path, storage, args).parent.mkdir(parents=True)  # as tuning leaves it
    edited = tmp_path / "edited"
    shutil.copytree(assets["data"], edited)
    with (edited / "redsm5_posts.csv").open("a") as stream:
        stream.write("extra-post,one more post that was not there when the study was tuned\n")
    edit_recorded_spec("moved", storage, data_dir=str(edited))
    line = one_line_error(
        run(by_name("moved", storage), tmp_path),
        2,
        "study 'moved' was created from another spec (data: ",
        "the spec recorded in the study no longer describes what it was tuned with (the files "
        "under data_dir changed since, or the record was edited in its database); finalize with "
        "the YAML, --set flags and data it was tuned with",
    )
    assert "hpo finalize moved" not in line
    assert not final_dir(tmp_path, storage, args).exists(), "nothing retrained"


@pytest.mark.slow
def test_a_split_without_test_posts_is_refused_before_any_retraining_and_validate_warns(
    tmp_path, assets
):
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    args = searched(
        tmp_path, assets, storage, "no-test", settings=("train.split_fractions=[0.5,0.5,0]",)
    )
    result = run(finalize_argv(storage, args), tmp_path)
    one_line_error(
        result,
        2,
        "the test split is empty (60 posts, split_fractions [0.5, 0.5, 0.0]) and hpo finalize "
        "scores its model there",
    )
    assert not (final_dir(tmp_path, storage, args) / "runs").exists(), "nothing retrained"
    validated = run(
        [sys.executable, "-m", "hpo", "validate", SPEC, "--storage", storage, *args], tmp_path
    )
    assert validated.returncode == 0, validated.stderr[-3000:]
    assert (
        "warning: the test split is empty" in validated.stdout
        and "hpo finalize will refuse" in validated.stdout
    )


@pytest.fixture(scope="module")
def partial(tmp_path_factory, assets) -> dict:
    """A study finalized with --partial while one of its trials still ran."""
    root = tmp_path_factory.mktemp("partial")
    storage = f"sqlite:///{root / 'hpo.db'}"
    args = searched(root, assets, storage, "partial", finished=3, running=1)
    result = run(finalize_argv(storage, args, "--partial", "--top-k", "1", "--seeds", "1"), root)
    assert result.returncode == 0, result.stderr[-3000:]
    return {
        "root": root,
        "storage": storage,
        "args": args,
        "final": final_dir(root, storage, args),
        "stdout": result.stdout,
    }


@pytest.mark.slow
def test_partial_finalizes_and_says_so_in_the_metrics_and_the_card(partial):
    summary = json.loads((partial["final"] / "metrics.json").read_text())
    assert summary["search"] == {
        "n_trials": 4,
        "finished": 3,
        "running": 1,
        "partial": True,
        "ended_by_time_budget": False,
    }
    assert (
        "Partial search: finalized (--partial) when 3 of 4 trials had finished"
        in (partial["final"] / "model_card.md").read_text()
    )
    # the plan, said before the first retraining
    plan = partial["stdout"].splitlines()
    start = plan.index("finalize partial: the plan")
    assert plan[start + 1 : start + 3] == [
        "  configurations  the best 1 of the study's 3 distinct completed: "
        "trial 2 (macro_f1 0.5200)",
        "  retrainings     1 seed(s) each: 1; 1 at a time (--workers 1)",
    ]


@pytest.mark.slow
def test_already_finalized_checks_its_model_and_names_the_settings_it_ignores(partial):
    final, root = partial["final"], partial["root"]
    argv = finalize_argv(partial["storage"], partial["args"])
    other = run([*argv, "--top-k", "2", "--seeds", "1"], root)
    assert other.returncode == 0 and "already finalized" in other.stdout
    assert (
        "ignored: --top-k 2; the study was finalized with --top-k 1 --seeds 1 --refit train"
        in other.stdout
    )

    # the search found better since: the rerun says so, and still scores nothing
    study = open_study(load_spec(SPEC, partial["args"][1::2], partial["storage"]))
    study.tell(3, 0.9)  # the trial that was running
    better = run(argv, root)
    assert better.returncode == 0 and "already finalized" in better.stdout
    assert (
        "the study's best is now trial 3 (macro_f1 0.9000), found after this final was made "
        "from trial 2 (0.5200) and the others it retrained; move "
    ) in better.stdout and "aside to finalize anew" in better.stdout

    # final/model is the model's only copy: damaged, it is refused, never silently replaced
    assert not (final / "chosen").exists() and not (final / "ensemble").exists()
    head = final / "model" / "head.safetensors"
    head.write_bytes(head.read_bytes()[:10])  # truncated
    gone = run(argv, root)
    one_line_error(
        gone, 2, "finalized, but", "is missing or incomplete", "only copy", "aside to finalize anew"
    )


def test_retraining_children_split_the_cores_follow_finalize_and_keep_the_storage_out_of_ps(
    tmp_path,
):
    from hpo.final.retrain import child_launches

    launches = child_launches(
        "s.yaml",
        ["train.epochs=1"],
        tmp_path / "runs",
        2,
        threads=3,
        storage="postgresql://u:s3cret@db/hpo",
        parent_pid=4242,
        base_env={"KEEP": "1"},
        memory_mb=5000,
    )
    assert len(launches) == 2
    for cmd, env in launches:
        assert cmd[1:4] == ["-m", "hpo", "retrain"] and "s3cret" not in " ".join(cmd)
        assert (
            cmd[cmd.index("--parent-pid") + 1] == "4242" and cmd[cmd.index("--threads") + 1] == "3"
        )
        # each retraining's share of the host memory
        assert cmd[cmd.index("--memory-limit") + 1] == "5000"
        assert cmd[-2:] == ["--set", "train.epochs=1"]
        assert (
            env["HPO_STORAGE"] == "postgresql://u:s3cret@db/hpo" and env["OMP_NUM_THREADS"] == "3"
        )
        assert env["KEEP"] == "1"


def _plant_folds(runs: Path, k: int, done: int) -> list[Path]:
    """What a ``finalize --cv k`` stopped after ``done`` folds leaves: their run folders."""
    from hpo.final.retrain import Run

    folders = [runs / Run(1, 0, {}, 0, folds=k, fold=i).name for i in range(done)]
    for folder in folders:
        (folder / "model").mkdir(parents=True)
        (folder / "result.json").write_text("{}")
        (folder / "heldout.json").write_text("{}")
    return folders


def test_fold_runs_of_another_k_are_removed_and_those_of_this_k_kept(tmp_path):
    from hpo.final.final_folder import forget_other_folds

    runs = tmp_path / "runs"
    stale, kept = _plant_folds(runs, 180, 5), _plant_folds(runs, 3, 2)
    (runs / "trial_0-seed_0").mkdir()  # the search's own split: never a fold
    said: list[str] = []
    forget_other_folds(runs, 3, said.append)
    assert not any(folder.exists() for folder in stale) and all(f.exists() for f in kept)
    assert said == [
        "removed 5 fold retrainings an earlier finalize left (--cv 180); this one runs --cv 3"
    ]
    forget_other_folds(runs, 0, said.append)  # a finalize without --cv
    assert sorted(path.name for path in runs.iterdir()) == ["trial_0-seed_0"]
    assert (
        said[-1]
        == "removed 2 fold retrainings an earlier finalize left (--cv 3); this one runs no --cv"
    )


@pytest.mark.slow
def test_a_finalize_with_another_cv_removes_the_folds_an_interrupted_one_left(tmp_path, assets):
    """Issue #48, item 19: an interrupted ``--cv 180`` re-run with ``--cv 2``."""
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    args = searched(tmp_path, assets, storage, "refold")
    runs = final_dir(tmp_path, storage, args) / "runs"
    stale = _plant_folds(runs, 180, 3)
    done = run(finalize_argv(storage, args, "--top-k", "1", "--seeds", "1", "--cv", "2"), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "removed 3 fold retrainings an earlier finalize left (--cv 180)" in done.stdout
    assert not any(folder.exists() for folder in stale)
    assert sorted(path.name for path in runs.glob("*-fold_*")) == [
        "trial_3-seed_0-fold_1of2",
        "trial_3-seed_0-fold_2of2",
    ]


@pytest.mark.slow
def test_a_final_or_study_folder_that_leads_out_of_output_dir_is_refused_untouched(
    tmp_path, assets
):
    """Issue #55 item 2: ``final/`` (or the study folder) a symlink to a folder outside
    output_dir: finalize overwrote the model_card.md there and deleted model/notes.txt, exit 0.
    Now: exit 2, one line naming the path, before anything is written or deleted."""
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    args = searched(tmp_path, assets, storage, "leads-out")
    final = final_dir(tmp_path, storage, args)
    study_folder = final.parent
    study_folder.mkdir(parents=True)  # as tuning leaves it

    def outside_final(where: Path) -> dict[Path, str]:
        (where / "model").mkdir(parents=True)
        files = {where / "model_card.md": "my own card\n", where / "model" / "notes.txt": "x\n"}
        for path, text in files.items():
            path.write_text(text)
        return files

    outside = tmp_path / "elsewhere"
    files = outside_final(outside)
    final.symlink_to(outside, target_is_directory=True)
    line = one_line_error(
        run(finalize_argv(storage, args, "--top-k", "1", "--seeds", "1"), tmp_path),
        2,
        f"{final} resolves to {outside.resolve()}, outside output_dir {tmp_path / 'out'}",
        "remove the symlink that leads out",
    )
    assert "Traceback" not in line
    assert {path: path.read_text() for path in files} == files, "nothing there touched"
    assert sorted(p.name for p in outside.iterdir()) == ["model", "model_card.md"]

    final.unlink()  # now the study folder itself leads out
    study_folder.rmdir()
    away = tmp_path / "away"
    files = outside_final(away / "final")
    study_folder.symlink_to(away, target_is_directory=True)
    one_line_error(
        run(finalize_argv(storage, args, "--top-k", "1", "--seeds", "1"), tmp_path),
        2,
        f"{study_folder} resolves to {away.resolve()}, outside output_dir",
    )
    assert {path: path.read_text() for path in files} == files, "nothing there touched"
    assert sorted(p.name for p in away.iterdir()) == ["final"], "no lock, no runs"


@pytest.mark.slow
def test_a_recorded_cache_dir_edited_to_lead_out_is_refused(tmp_path, assets):
    """Issue #55 item 3: the study's recorded train.cache_dir edited in its database to a
    folder outside output_dir (and outside where hpo runs): `hpo finalize NAME` made folders and
    .npy files there and trained on what it found. Now refused in one line naming the --set
    that makes it the user's own choice, before anything is written there."""
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    args = searched(tmp_path, assets, storage, "recached")
    final_dir(tmp_path, storage, args).parent.mkdir(parents=True)  # as tuning leaves it
    planted = tmp_path / "planted"
    document = edit_recorded_spec("recached", storage)  # as it was
    edit_recorded_spec("recached", storage, train={**document["train"], "cache_dir": str(planted)})
    work = tmp_path / "work"  # where hpo runs: planted/ is not under it
    work.mkdir()
    one_line_error(
        run(by_name("recached", storage, "--top-k", "1", "--seeds", "1"), work),
        2,
        f"study 'recached': its recorded train.cache_dir {planted} resolves to ",
        f"outside its output_dir {tmp_path / 'out'}",
        f"pass --set train.cache_dir={planted} if it is yours",
    )
    assert not planted.exists(), "nothing created there"
    assert not final_dir(tmp_path, storage, args).exists(), "nothing retrained"


@pytest.mark.slow
@pytest.mark.parametrize("edited", ["roberta-base", "{tmp}/nowhere"])
def test_a_recorded_encoder_path_that_is_no_local_folder_is_refused(tmp_path, assets, edited):
    """Issue #55 item 4: the recorded model_paths edited in the database (to a hub id: a
    download; to a folder that is not there) was trusted by `hpo finalize NAME`. Refused in one
    line naming the --set that makes it the user's own choice, nothing retrained."""
    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    args = searched(tmp_path, assets, storage, "re-encoded")
    final_dir(tmp_path, storage, args).parent.mkdir(parents=True)  # as tuning leaves it
    path = edited.format(tmp=tmp_path)
    document = edit_recorded_spec("re-encoded", storage)
    edit_recorded_spec(
        "re-encoded", storage, model_paths={**document["model_paths"], "tiny-roberta": path}
    )
    one_line_error(
        run(by_name("re-encoded", storage, "--top-k", "1", "--seeds", "1"), tmp_path),
        2,
        f"study 're-encoded': its recorded encoder 'tiny-roberta' is {path}, no folder on this "
        "machine",
        f"pass --set model_paths.tiny-roberta={path} if you mean it, or the encoder's folder",
    )
    assert not final_dir(tmp_path, storage, args).exists(), "nothing retrained"


@pytest.mark.slow
def test_a_planted_cache_with_flipped_labels_is_rebuilt_not_trained_on(tmp_path, assets):
    """Issue #55 item 3: a tokenization cache at the data's own keys, its labels flipped and
    its digest written again (what a planter can do): finalize's retraining trained on it
    (test 0.309 against 0.401). Now each such folder is rebuilt from the data, with a warning
    in the run's log, before training."""
    import numpy as np

    from hpo.data.tokenized import load_tokenized, save_tokenized
    from hpo.final.plan import plan
    from hpo.final.retrain import train_config
    from hpo.train.prepare import prepare_data

    storage = f"sqlite:///{tmp_path / 'hpo.db'}"
    cache = tmp_path / "cache"
    args = searched(tmp_path, assets, storage, "planted", settings=(f"train.cache_dir={cache}",))
    spec = load_spec(SPEC, args[1::2], storage)
    best = plan(spec, open_study(spec), 1, 1)[0]
    prepare_data(train_config(spec, best.params, best.seed, None))  # the cache, as tuning left it
    truth = {}
    for folder in sorted(p for p in cache.iterdir() if p.is_dir()):
        labels = np.load(folder / "labels.npy")
        split = load_tokenized(folder, labels)
        truth[folder] = labels
        shutil.rmtree(folder)
        save_tokenized(folder, dataclasses.replace(split, labels=1 - labels))
    assert len(truth) == 3, truth  # train, validation, test

    done = run(finalize_argv(storage, args, "--top-k", "1", "--seeds", "1"), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    log = next(final_dir(tmp_path, storage, args).glob("runs/*/train.log")).read_text()
    assert log.count("rebuilding it") >= 2, log  # train and validation, before training
    for folder, labels in truth.items():
        np.testing.assert_array_equal(np.load(folder / "labels.npy"), labels)
