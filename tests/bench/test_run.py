"""bench/run.py is the one command line of every measure: each measure is one module with the
same face, registered there; its options are bench.run's, with the measure's own defaults where
they differ; every command a results file records still reaches the module that writes that
file; and no bench module imports bench.run back."""

from __future__ import annotations

import ast
import importlib
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import run
from bench.results import load_all

BENCH = Path(run.__file__).resolve().parent
REPO = BENCH.parent
# bench/'s modules that are no measure: the command lines, the shared pieces, the Trainer side
NOT_MEASURES = {
    *("__init__", "run", "report", "results", "common", "workload", "trainer_baseline"),
    "trainings",  # the recipe trained in child processes, for portfolio_moves and fold_thresholds
    *("whole_post_runs", "post_windows"),  # whole_post's one run, and the window facts
    "fidelity_replay",  # fidelity_rank's pure replay
}
# measures retired once their question was answered: the commit that last had each
RETIRED = {"budget_tail": "c34f836", "malloc_thresholds": "c34f836", "threshold_rules": "41927d2"}
# --only's names before the measures got modules of their own: results files and docs name them
NAMES_BEFORE = (
    "p1",
    "p2",
    "p3",
    "p4",
    "p5",
    "p6",
    "p7",
    "startup",
    "peak_memory",
    "formulations",
    "determinism",
    "search_budget",
    "pruning_regret",
    "sizing",
)


def test_every_measure_module_is_registered():
    modules = {path.stem for path in BENCH.glob("*.py")}
    assert modules - NOT_MEASURES == set(run.MEASURES)


@pytest.mark.parametrize("module", run.MEASURES)
def test_every_measure_module_has_the_same_face_and_no_command_line_of_its_own(module):
    measure = importlib.import_module(f"bench.{module}")
    assert measure.NAME == run.MEASURES[module][0]
    assert measure.DEFINITION.strip() and "\n" not in measure.DEFINITION
    assert callable(measure.measure)
    assert not hasattr(measure, "main")
    options = vars(run.parser().parse_args([]))
    assert set(getattr(measure, "DEFAULTS", {})) <= set(options), "each default is an option's"


def test_every_earlier_name_reaches_the_module_that_writes_its_results_file():
    for name in NAMES_BEFORE:
        (module,) = run.chosen(run.parser().parse_args(["--only", name]).only)
        assert name in run.MEASURES[module], name


def test_a_module_name_selects_it_and_names_of_one_module_run_it_once_in_run_order():
    assert run.chosen(["same_work"]) == ["same_work"]
    assert run.chosen(["sizing", "p2", "p4", "parallel_trials", "p1"]) == [
        "same_work",
        "parallel_trials",
        "sizing",
    ]
    assert run.chosen(None) == run.chosen([]) == list(run.MEASURES)


def test_a_measure_gets_its_own_defaults_unless_the_command_line_sets_the_option():
    single = SimpleNamespace(NAME="single", DEFAULTS={"posts": 600})
    sweep = SimpleNamespace(NAME="sweep", DEFAULTS={"clarity": [0.75]})
    bare = run.parser().parse_args([])
    assert run.options(single, bare).posts == 600
    assert run.options(sweep, bare).posts == run.DEFAULTS["posts"]
    assert run.options(single, bare).clarity == run.DEFAULTS["clarity"]
    assert run.options(sweep, bare).clarity == sweep.DEFAULTS["clarity"]
    given = run.parser().parse_args(["--posts", "90", "--clarity", "0.5"])
    assert run.options(single, given).posts == run.options(sweep, given).posts == 90
    assert run.options(single, given).clarity == 0.5  # one value where the measure takes one
    assert run.options(sweep, given).clarity == [0.5]
    several = run.parser().parse_args(["--clarity", "0.5", "0.7"])
    assert run.options(sweep, several).clarity == [0.5, 0.7]
    with pytest.raises(ValueError, match="single takes one --clarity"):
        run.options(single, several)


def _recorded_commands() -> dict[str, list[str]]:
    """Every committed results file's command, by file."""
    return {
        name: shlex.split(result["command"])
        for name, result in load_all().items()
        if result.get("command")
    }


def test_every_recorded_command_still_writes_its_file_through_bench_run():
    """A file written before bench.run was every measure's face records ``python -m
    bench.MODULE ARGS``: the same run is ``python -m bench.run --only MODULE ARGS``, its options
    spelled alike. A retired module's file names the commit that last had it instead."""
    recorded = _recorded_commands()
    assert {"p1", "time_to_quality", "p2", "p4", "startup", "calibration_c075"} <= set(recorded)
    page = " ".join((REPO / "docs" / "performance.md").read_text().split())
    for name, command in recorded.items():
        module = command[2].removeprefix("bench.")
        if module in RETIRED:
            assert f"`{RETIRED[module]}` last had `bench/{module}.py`" in page, name
            continue
        args = run.parser().parse_args(
            command[3:] if module == "run" else ["--only", module, *command[3:]]
        )
        modules = run.chosen(args.only)
        assert any(name in run.MEASURES[module] for module in modules), command
        for module in modules:  # and each measure takes the options as given
            run.options(importlib.import_module(f"bench.{module}"), args)


def test_an_unknown_measure_is_a_usage_error_that_lists_the_names():
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--only", "p9"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 2
    assert "invalid choice: 'p9'" in done.stderr and "'same_work'" in done.stderr


def test_several_values_for_a_measure_that_takes_one_are_a_usage_error():
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--only", "seed_ensemble", "--clarity", "0.5", "0.7"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 2, done.stderr
    assert "seed_ensemble takes one --clarity; give several to calibration" in done.stderr
    assert "Traceback" not in done.stderr


def test_no_bench_module_imports_the_command_line_back():
    for path in BENCH.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert "bench.run" not in names, path.name


def test_a_results_file_rewritten_is_not_uncommitted_code_but_code_is(tmp_path):
    """A bench rewriting its own results file ran committed code; a changed module did not."""
    import subprocess

    from bench.results import commit

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "m.json").write_text("{}")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    (tmp_path / "bench" / "results" / "m.json").write_text('{"a": 1}')
    assert not commit(tmp_path / "bench").endswith("+uncommitted")
    (tmp_path / "code.py").write_text("x = 2\n")
    assert commit(tmp_path / "bench").endswith("+uncommitted")
