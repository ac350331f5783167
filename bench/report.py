"""The Performance table, generated from bench/results/*.json into docs/performance.md.

    python -m bench.report            # rewrite the generated block between the markers
    python -m bench.report --check    # exit 1 when the published block differs from the files

Everything between BEGIN and END is this module's output; the prose around it is written by
hand and states no figure of its own (tests/bench/test_report.py holds both to that).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from bench.results import load_all

DOC = Path(__file__).resolve().parents[1] / "docs" / "performance.md"
BEGIN = (
    "<!-- BEGIN GENERATED: python -m bench.report "
    "(from bench/results/*.json; do not edit by hand) -->"
)
END = "<!-- END GENERATED -->"
# Every measure the project publishes, in the table's order; one without a results file reads
# "not measured", never an older figure.
MEASURES = {
    "p1": "P1 same work",
    "time_to_quality": "Time to equal quality",
    "p2": "P2 trial set-up",
    "p3": "P3 orchestration",
    "p4": "P4 parallel trials",
    "p5": "P5 GPU throughput",
    "p6": "P6 pruning",
    "p7": "P7 search",
    "first_looks": "First looks per full trial (pruner simulation)",
    "startup": "Start-up",
    "peak_memory": "Peak memory (issue #25 workload)",
    "memory": "Peak memory (long posts, chunks)",
    "formulations": "Formulation tokens",
    "determinism": "deterministic: true",
    "search_budget": "Search + finalize vs the standard recipe (150 posts)",
    "search_budget_mid": "Search + finalize vs the standard recipe (500 posts, real hour's shape)",
    "pruning_regret": "Pruning regret (150 posts)",
    "pruning_regret_full": "Pruning regret (calibrated sample, real size)",
    "pruning_regret_real": "Pruning regret on the real ReDSM5 (issue #56)",
    "sizing": "Supermax trial cost (estimate)",
    "calibration_probe": "Realistic sample difficulty (fast proxy)",
    "calibration_mid": "Realistic sample difficulty (real size, short run)",
    "calibration": "Realistic sample difficulty (full size, clarity 0.6)",
    "calibration_c075": "Realistic sample difficulty (full size, clarity 0.75: shipped)",
    "hardware_limit": "Hardware limit (training step / matmul peak)",
    "explain": "Explanation (symptoms + evidence sentences)",
    "seed_ensemble": "Seed ensemble vs one seed (finalize --ensemble seeds)",
    "seed_ensemble_real": "Seed ensemble vs one seed on the real ReDSM5 (issue #56)",
    "fold_thresholds": "Threshold rules of finalize --cv, same models",
    "fold_thresholds_real": "Threshold rules of finalize --cv on the real ReDSM5, same models",
    "portfolio_moves_real": "Portfolio moves on the real ReDSM5 (issue #56, paired seeds)",
    "portfolio_moves": "Portfolio moves vs the standard recipe (paired seeds)",
    "portfolio_moves_real_after2": "Later portfolio moves on the real ReDSM5 (issue #56)",
    "threshold_rules": "Threshold rules of finalize --cv (same models, paired)",
    "budget_tail": "A time budget's tail: the start rule before and after b086acf",
    "malloc_thresholds": "Trial time: glibc's thresholds before and after f9aac69",
    "whole_post": "Whole post vs head_tail (issue #49, real size)",
    "whole_post_real": "Whole post vs head_tail on the real ReDSM5 (issue #56)",
    "whole_post_real_recipe_hard_negatives": "The recipe with hard negatives, real ReDSM5 (1 seed)",
    "fidelity_rank": "Low fidelities vs full training (issue #50, real size, H200)",
    "lexical_baselines": "Bag of words on the realistic sample (real size)",
    "lexical_baselines_real": "Bag of words on the real ReDSM5",
    "learning_curve": "Training posts against quality on the realistic sample",
    "learning_curve_real": "Training posts against quality on the real ReDSM5",
    "busy_threads": "Threads beside other work (issue #55)",
    "calibration_shipped": "The recipe on the recalibrated sample (issue #56, real size)",
    "whole_post_cost": "whole_post epoch time over head_tail's (issue #56)",
}
# For results files written before their measure recorded its definition (memory.json).
DEFINITIONS = {
    "memory": "peak RSS (MiB) of one long_text: chunks trial on long-tailed posts, "
    "in a fresh process (bench/memory.py)",
}
UNITS = (  # first match wins: a rate per second before a duration in seconds
    ("_per_s", "/s"),
    ("_ms", " ms"),
    ("_mb", " MiB"),
    ("_s", " s"),
    ("_seconds", " s"),
    ("ratio", "×"),
    ("trials_per_hour", " trials/hour"),
)


def unit(figure: str) -> str:
    for suffix, text in UNITS:
        if figure.endswith(suffix) or figure.startswith(suffix):
            return text
    return ""


def fmt(value, figure: str = "") -> str:
    """One number as the docs print it: two decimals under 10, one under 100, else whole."""
    if value is None:
        return "not reached"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    text = (
        f"{value:.2f}"
        if abs(value) < 10
        else f"{value:.1f}"
        if abs(value) < 100
        else f"{value:,.0f}"
    )
    return text + unit(figure)


def _target(target: dict | None, figure: str) -> str:
    if not target:
        return "measured"
    if "at_most" in target:
        return f"≤ {fmt(target['at_most'], figure)}"
    if "at_least" in target:
        return f"≥ {fmt(target['at_least'], figure)}"
    return "measured"


def _spread(stats: dict, figure: str) -> str:
    if not stats.get("runs"):
        return "—"
    return f"{fmt(stats.get('min'), figure)} – {fmt(stats.get('max'), figure)}"


def table(results: dict[str, dict]) -> list[str]:
    lines = [
        "| Measure | Definition | Target | Median | Runs | Min – max | Verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for measure in [*MEASURES, *sorted(set(results) - set(MEASURES))]:  # absent ones too
        label = MEASURES.get(measure, measure)
        result = results.get(measure)
        if result is None:
            lines.append(f"| {label} | — | — | not measured | 0 | — | not measured |")
            continue
        if result["workload"].get("data_kind") == "real ReDSM5":  # else generated data
            label += " — **real ReDSM5**"
        figure, target = result["value"], result.get("target")
        key = target["key"] if target else next(iter(result["summary"]))
        stats = result["summary"][key]
        verdict = target["verdict"] if target else "measured"
        definition = result.get("definition") or DEFINITIONS.get(measure, "")
        median = fmt(stats.get("median"), figure) if stats.get("runs") else "not measured"
        lines.append(
            f"| {label} | {definition} ({key}) | {_target(target, figure)} | **{median}**"
            f" | {stats['runs']} | {_spread(stats, figure)} | **{verdict}** |"
        )
    return lines


def details(measure: str, result: dict) -> list[str]:
    """Every figure of every case in one table (median, and min – max where the runs differ),
    one row per case or per figure, whichever is fewer; then one paragraph with the runs'
    machine, versions, commit, workload and command, and the file's other details."""
    label = MEASURES.get(measure, measure)
    figures = result.get("figures") or {result["value"]: result["summary"]}
    cells = {
        (case, figure): _cell(stats, figure)
        for figure, cases in figures.items()
        for case, stats in cases.items()
        if stats.get("runs")
    }
    runs = {}
    for cases in figures.values():
        for case, stats in cases.items():
            runs[case] = max(runs.get(case, 0), stats.get("runs") or 0)
    cases = [case for case in runs if runs[case]]
    uniform = len({runs[case] for case in cases}) == 1  # else each case names its runs
    case_names = [case if uniform else f"{case} ({_runs(runs[case])})" for case in cases]
    if len(cases) <= len(figures):  # a row per case
        head = ["Case", *figures]
        rows = [
            [name, *(cells.get((case, figure), "—") for figure in figures)]
            for case, name in zip(cases, case_names, strict=True)
        ]
    else:  # a row per figure
        head = ["Figure", *case_names]
        rows = [[figure, *(cells.get((case, figure), "—") for case in cases)] for figure in figures]
    machine, versions = result["machine"], result["versions"]
    about = (
        (f"{_runs(runs[cases[0]])} per case. " if uniform and cases else "")
        + f"Measured {result['date'][:10]} at commit `{result['commit']}` on {machine['cpu']} "
        f"({machine.get('cores')} cores; "
        f"flags: {', '.join(machine.get('flags') or ['none of avx2/avx512'])}; "
        f"{machine.get('memory_gb')} GiB; GPU: {machine.get('gpu') or 'none'}); "
        + ", ".join(f"{name} {version}" for name, version in versions.items() if version)
        + ". Workload: "
        + "; ".join(f"{k}: {v}" for k, v in result["workload"].items())
        + "."
        + (f" Reproduce: `{result['command']}`." if result.get("command") else "")
    )
    if extra := result.get("details"):
        about += " Also recorded: " + "; ".join(
            f"{name}: {_detail(value, name)}" for name, value in extra.items()
        )
    return [
        f"#### {label} (`{measure}.json`)",
        _row(head),
        _row(["---"] * len(head)),
        *map(_row, rows),
        "",
        about,
        "",
    ]


def _runs(count: int) -> str:
    return f"{count} run{'s' if count > 1 else ''}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(map(str, cells)) + " |"


def _cell(stats: dict, figure: str) -> str:
    """The median, and the runs' min – max where they differ."""
    median = fmt(stats.get("median"), figure)
    if stats["runs"] > 1 and stats.get("min") != stats.get("max"):
        return f"{median} ({_spread(stats, figure)})"
    return median


def _detail(value, name: str) -> str:
    """A results file's detail in a few words: an interval as low – high, a mapping as
    key value pairs, raw records (curves) counted, the rest as numbers or text."""
    if isinstance(value, dict):
        return ", ".join(f"{key} {_detail(item, name)}" for key, item in value.items())
    if isinstance(value, list):
        if len(value) == 2 and all(_number(v) for v in value):
            return f"{_detail(value[0], name)} – {_detail(value[1], name)}"
        if all(_number(v) or isinstance(v, str) for v in value):
            return ", ".join(_detail(v, name) for v in value)
        return f"{len(value)} recorded in the results file"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"  # a count
    if isinstance(value, float) and abs(value) < 1 and not unit(name):
        return f"{value:.3f}"  # a difference or a share: the third decimal tells them apart
    return fmt(value, name)


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def render(results: dict[str, dict]) -> str:
    lines = [BEGIN, "", *table(results), "", "### Every figure, per measure", ""]
    for measure in _ordered(results):
        lines += details(measure, results[measure])
    return "\n".join(lines).rstrip() + "\n\n" + END


def _ordered(results: dict) -> list[str]:
    return [m for m in MEASURES if m in results] + sorted(set(results) - set(MEASURES))


def generated_block(text: str) -> str:
    match = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), text, re.S)
    if not match:
        raise SystemExit(
            f"{DOC}: no generated block; put the lines {BEGIN!r} and {END!r} where the table goes"
        )
    return match.group(0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if docs/performance.md is out of date"
    )
    parser.add_argument(
        "--committed",
        action="store_true",
        help="only the results files git tracks (leave out someone's run in progress)",
    )
    args = parser.parse_args()
    text = DOC.read_text()
    results = load_all()
    if args.committed:
        tracked = subprocess.run(
            ["git", "ls-files", "bench/results"],
            capture_output=True,
            text=True,
            cwd=DOC.parents[1],
            check=True,
        ).stdout.split()
        results = {m: r for m, r in results.items() if f"bench/results/{m}.json" in tracked}
    block, fresh = generated_block(text), render(results)
    if args.check:
        sys.exit(
            0
            if block == fresh
            else f"{DOC} is out of date with bench/results: run python -m bench.report"
        )
    DOC.write_text(text.replace(block, fresh))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
