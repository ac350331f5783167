"""bench/first_looks.py, the pruner simulation docs/specs.md quotes, runs through bench.run and
writes a results file bench/report.py publishes: the first looks per full trial's compute at
each budget, median over seeds, and their means."""

from __future__ import annotations

import json

from bench import first_looks, report, results, run


def test_the_simulation_writes_a_results_file_the_report_publishes(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    args = run.parser().parse_args(["--only", "first_looks", "--runs", "3"])
    first_looks.measure(run.options(first_looks, args))
    written = json.loads((tmp_path / "first_looks.json").read_text())
    assert written["command"] == "python -m bench.run --only first_looks --runs 3"
    assert set(written["runs"]) == set(first_looks.VARIANTS)
    none = written["runs"]["none"]
    assert [seed["seed"] for seed in none] == [0, 1, 2]
    for budgets in first_looks.BUDGETS:
        expected = [first_looks.first_looks("none", budgets, seed) / budgets for seed in range(3)]
        assert [seed[first_looks.figure(budgets)] for seed in none] == expected
    means = written["details"]["mean_over_seeds"]
    # pruning on ninths of an epoch gives more configurations a first look than no pruning
    assert means["successive_halving_ninth"]["8"] > means["none"]["8"]
    section = report.details("first_looks", written)
    assert section[0] == "#### First looks per full trial (pruner simulation) (`first_looks.json`)"
