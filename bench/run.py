"""The benchmark suite: this service against Trainer.hyperparameter_search and against raw
Optuna, on this machine. Each measure writes ``bench/results/<measure>.json`` (every run's raw
values, median, spread, machine, versions, commit, target and verdict); ``python -m
bench.report`` turns those files into the table in docs/performance.md.

    make bench                              # every measure, 5 runs each
    python -m bench.run --only p1 p4        # some of them
    python -m bench.run --runs 7            # more runs of each
    python -m bench.run --data-dir DIR      # real ReDSM5 files instead of generated sample data

Each measure is one module of bench/ with the same face: NAME (its results file), DEFINITION
(what it measures, in one line) and measure(args), which runs it and writes the file. This
module only reads the command line and calls them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil

from bench.common import RUNS
from bench.results import MACHINE_USE

# Each measure's module, in the order a full run takes them, and the results files its runs
# write (the first is the module's NAME). --only takes a file's name or the module's.
MEASURES = {
    "same_work": ("p1", "time_to_quality"),
    "parallel_trials": ("p4", "p2"),
    "startup": ("startup",),
    "orchestration": ("p3",),
    "peak_memory": ("peak_memory",),
    "memory": ("memory",),
    "gpu_throughput": ("p5",),
    "pruning_savings": ("p6",),
    "search_effectiveness": ("p7",),
    "formulations": ("formulations",),
    "determinism": ("determinism",),
    "search_budget": ("search_budget", "search_budget_mid", "search_budget_full"),
    "pruning_regret": ("pruning_regret", "pruning_regret_full", "pruning_regret_mid"),
    "sizing": ("sizing",),
}
NAMES = {name: module for module, files in MEASURES.items() for name in (*files, module)}


def parser() -> argparse.ArgumentParser:
    listing = "\n".join(
        f"  {module:<22}{', '.join(f'{name}.json' for name in files)}"
        for module, files in MEASURES.items()
    )
    parser = argparse.ArgumentParser(
        prog="python -m bench.run",
        description=__doc__,
        epilog=f"measures, in run order (bench/MODULE.py: its files in bench/results/):\n{listing}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--only",
        nargs="*",
        choices=NAMES,
        metavar="MEASURE",
        help="the measures to run, by results file (p1) or module (same_work); default: all",
    )
    parser.add_argument(
        "--machine-use",
        help="what else ran on the machine meanwhile, recorded in every results file "
        f"(default: {MACHINE_USE['text']!r})",
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="runs (rounds of alternated sides) of each measure"
    )
    parser.add_argument("--data-dir", help="real ReDSM5 files (default: generated sample data)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="search_budget: keep the arms a cut-short run finished (each records its commit); "
        "pruning_regret: replay the committed curves again instead of retraining them",
    )
    parser.add_argument(
        "--share",
        default="full",
        choices=("full", "mid", "quick"),
        help="search_budget, pruning_regret: the real job's size (days here for search_budget, "
        "an hour for pruning_regret) or a small share (about an hour, a quarter of one); "
        "search_budget also a third of it (mid: about two hours)",
    )
    parser.add_argument(
        "--baseline",
        metavar="COMMIT",
        help="startup: also time hpo tune at COMMIT (a git worktree of it) in every round",
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "HPO_BENCH_POSTGRES", "postgresql+psycopg2://postgres@127.0.0.1:5432/hpo_bench"
        ),
        help="p3's PostgreSQL database (default: $HPO_BENCH_POSTGRES, else hpo_bench on "
        "127.0.0.1:5432)",
    )
    return parser


def chosen(only: list[str] | None) -> list[str]:
    """The modules ``--only``'s names reach, each once, in run order; every one without names."""
    wanted = {NAMES[name] for name in only} if only else set(MEASURES)
    return [module for module in MEASURES if module in wanted]


def main() -> None:
    args = parser().parse_args()
    if args.machine_use:
        MACHINE_USE["text"] = args.machine_use
    import optuna  # after parsing: --help and a wrong name answer at once

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    shutil.rmtree(RUNS / "studies", ignore_errors=True)
    # no tokenization carried over from an earlier run
    shutil.rmtree(RUNS / "cache", ignore_errors=True)
    for module in chosen(args.only):
        importlib.import_module(f"bench.{module}").measure(args)


if __name__ == "__main__":
    main()
