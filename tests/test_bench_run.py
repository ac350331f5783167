"""bench/run.py only reads the command line and dispatches: each measure is one module with the
same face, every name ``--only`` ever took still reaches the module that writes that results
file, and no bench module imports bench.run back."""

from __future__ import annotations

import ast
import importlib
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bench import run
from bench.results import load_all

BENCH = Path(run.__file__).resolve().parent
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


@pytest.mark.parametrize("module", run.MEASURES)
def test_every_measure_module_has_the_same_face(module):
    measure = importlib.import_module(f"bench.{module}")
    assert measure.NAME == run.MEASURES[module][0]
    assert measure.DEFINITION.strip() and "\n" not in measure.DEFINITION
    assert callable(measure.measure)


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


def test_the_command_each_results_file_records_still_writes_that_file():
    recorded = {
        name: result["command"]
        for name, result in load_all().items()
        if (result.get("command") or "").startswith("python -m bench.run ")
    }
    assert {"p1", "time_to_quality", "p2", "p4", "startup"} <= set(recorded)
    for name, command in recorded.items():
        args = run.parser().parse_args(shlex.split(command)[3:])
        assert any(name in run.MEASURES[module] for module in run.chosen(args.only)), command


def test_an_unknown_measure_is_a_usage_error_that_lists_the_names():
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--only", "p9"],
        capture_output=True,
        text=True,
        cwd=BENCH.parent,
    )
    assert done.returncode == 2
    assert "invalid choice: 'p9'" in done.stderr and "'same_work'" in done.stderr


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
