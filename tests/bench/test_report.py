"""The published performance figures and bench/results/*.json never disagree: the table in
docs/performance.md is regenerated and compared, and no prose there or in the README's
Performance section states a figure that no results file holds."""

from __future__ import annotations

import copy
import re

from bench import report
from bench.results import load_all, verdict
from tests.support import REPO

# A figure: a number with a unit of time, size, rate or ratio ("0.22×", "4,099 MB", "7.5 s").
FIGURE = re.compile(
    r"(?<![\w.,])(\d[\d,]*(?:\.\d+)?)\s*(×|x\b|%|ms\b|s\b|seconds\b|minutes\b|MiB|MB|GiB|GB|"
    r"trials/hour)"
)


def numbers_held(value) -> list[float]:
    """Every number anywhere in a results structure."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers_held(v)]
    if isinstance(value, list):
        return [n for v in value for n in numbers_held(v)]
    return []


def unheld_figures(text: str, held: list[float]) -> list[str]:
    """The figures in ``text`` that no held number gives at the precision they are written with."""
    missing = []
    for match in FIGURE.finditer(text):
        number = match.group(1).replace(",", "")
        decimals = len(number.split(".")[1]) if "." in number else 0
        scale = 100 if match.group(2) == "%" else 1
        if not any(abs(round(n * scale, decimals) - float(number)) < 1e-9 for n in held):
            missing.append(match.group(0))
    return missing


def doc_prose() -> str:
    text = (REPO / "docs" / "performance.md").read_text()
    return text.replace(report.generated_block(text), "")


def readme_performance() -> str:
    readme = (REPO / "README.md").read_text()
    return re.search(r"^## Performance\n(.*?)(?=^## )", readme, re.S | re.M).group(1)


def test_the_published_table_is_the_one_the_results_files_generate():
    published = report.generated_block((REPO / "docs" / "performance.md").read_text())
    assert published == report.render(load_all()), (
        "docs/performance.md is stale: run python -m bench.report"
    )


def published_cells(section: list[str]) -> dict[tuple[str, str], str]:
    """A measure's table as {(case, figure): cell}, whichever way it is laid out."""
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section[1:]
        if line.startswith("|")
    ]
    head, body = rows[0], rows[2:]
    bare = [re.sub(r" \(\d+ runs?\)$", "", name) for name in head]
    cells = {}
    for row in body:
        for column, cell in zip(bare[1:], row[1:], strict=True):
            key = (row[0], column) if head[0] == "Case" else (column, row[0])
            cells[re.sub(r" \(\d+ runs?\)$", "", key[0]), key[1]] = cell
    return cells


def test_every_figure_of_every_case_is_published_at_its_median():
    for measure, result in load_all().items():
        cells = published_cells(report.details(measure, result))
        figures = result.get("figures") or {result["value"]: result["summary"]}
        for figure, cases in figures.items():
            for case, stats in cases.items():
                if stats.get("runs"):
                    median = report.fmt(stats["median"], figure)
                    assert cells[case, figure].split(" (")[0] == median, (measure, case, figure)


def test_a_measure_is_laid_out_with_fewer_rows_and_names_uneven_runs():
    stats = {"runs": 5, "median": 1.0, "min": 0.5, "max": 2.0}
    one = {"runs": 1, "median": 3.0, "min": 3.0, "max": 3.0}
    result = {
        "value": "peak_mb",
        "figures": {"peak_mb": {"a": stats, "b": one, "c": stats}},
        "machine": {"cpu": "cpu"},
        "versions": {},
        "date": "2026-01-01",
        "commit": "abc",
        "workload": {},
        "details": {"gain": {"mean": -0.0281, "interval": [-0.0503, -0.004]}, "seeds": 3},
    }
    section = report.details("x", result)
    assert section[1] == "| Figure | a (5 runs) | b (1 run) | c (5 runs) |"  # one row, not three
    spread = "1.00 MiB (0.50 MiB – 2.00 MiB)"
    assert section[3] == f"| peak_mb | {spread} | 3.00 MiB | {spread} |"
    assert "Also recorded: gain: mean -0.028, interval -0.050 – -0.004; seeds: 3" in section[5]


def test_a_changed_results_file_makes_the_published_table_stale():
    results = load_all()
    measure = next(iter(results))
    changed = copy.deepcopy(results)
    target = changed[measure].get("target")
    key = target["key"] if target else next(iter(changed[measure]["summary"]))
    changed[measure]["summary"][key]["median"] = 123456.0
    assert report.render(changed) != report.generated_block(
        (REPO / "docs" / "performance.md").read_text()
    )


def test_neither_the_performance_page_nor_the_readme_states_a_figure_no_results_file_holds():
    held = numbers_held(load_all())
    assert unheld_figures(doc_prose(), held) == []
    assert unheld_figures(readme_performance(), held) == []


def test_a_figure_without_a_results_file_behind_it_is_caught():
    assert unheld_figures("P1 on the same work is 0.22× and start-up 7.5 s", [0.5412, 7.46]) == [
        "0.22×"
    ]
    assert unheld_figures("peak 4,099 MB, 61% of it", [4099.2, 0.61]) == []


def test_the_readme_points_to_the_performance_page():
    assert "docs/performance.md" in readme_performance()


def test_a_measure_without_a_results_file_reads_not_measured():
    rendered = report.render({})
    for label in report.MEASURES.values():
        assert f"| {label} | — | — | not measured |" in rendered
    assert FIGURE.search(rendered) is None


def test_every_headline_is_the_median_of_at_least_five_runs_and_its_verdict_follows_from_it():
    for measure, result in load_all().items():
        target = result.get("target")
        key = target["key"] if target else next(iter(result["summary"]))
        runs = result["summary"][key]["runs"]
        if target:
            assert target["verdict"] == verdict(
                result["summary"][key].get("median"), target, runs
            ), measure
        if not target or target["verdict"] != "not measured":
            # fewer only where the file says why (the issue that asked for the measure set it)
            least = result.get("fewer_runs", {}).get("at_least", 5)
            assert least == 5 or result["fewer_runs"].get("why"), measure
            assert runs >= least, f"{measure}: {key} has fewer than {least} runs"


def test_a_range_target_is_met_only_inside_it():
    band = {"within": [0.55, 0.70]}
    assert [verdict(v, band) for v in (0.49, 0.55, 0.62, 0.70, 0.71)] == [
        "missed",
        "met",
        "met",
        "met",
        "missed",
    ]
