"""The benchmark suite's one command line: this service against Trainer.hyperparameter_search
and against raw Optuna, what it costs and what its search buys, on this machine. Each measure
writes ``bench/results/<file>.json`` (every run's raw values, median, spread, machine, versions,
commit, target and verdict, and the command that wrote it); ``python -m bench.report`` turns
those files into the tables in docs/performance.md.

    make bench                                      # every measure, 5 runs each
    python -m bench.run --only p1 p4                # some of them
    python -m bench.run --runs 7                    # more runs of each
    python -m bench.run --data-dir DIR              # real ReDSM5 files, not generated data
    python -m bench.run --only seed_ensemble --posts 1484 --max-length 128

Each measure is one module of bench/ with the same face: NAME (its results file), DEFINITION
(what it measures, in one line), measure(args), which runs it and writes the file, and, where
its options' defaults differ from the ones below, DEFAULTS. This module only reads the command
line and calls them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil

from bench.common import RUNS
from bench.results import MACHINE_USE
from hpo.fixtures.realistic import CLARITY, REAL_POSTS

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
    "first_looks": ("first_looks",),
    "formulations": ("formulations",),
    "determinism": ("determinism",),
    "hardware_limit": ("hardware_limit",),
    "bf16_step": ("bf16_step",),
    "explain": ("explain",),
    "sizing": ("sizing",),
    "calibration": (
        "calibration",
        "calibration_c075",
        "calibration_mid",
        "calibration_probe",
        "calibration_shipped",
    ),
    "search_budget": ("search_budget", "search_budget_mid", "search_budget_full"),
    "pruning_regret": (
        "pruning_regret",
        "pruning_regret_full",
        "pruning_regret_mid",
        "pruning_regret_real",
    ),
    "seed_ensemble": ("seed_ensemble", "seed_ensemble_real"),
    "fold_thresholds": ("fold_thresholds", "fold_thresholds_real"),
    "portfolio_moves": ("portfolio_moves", "portfolio_moves_real", "portfolio_moves_real_after2"),
    "whole_post": ("whole_post", "whole_post_real", "whole_post_real_recipe_hard_negatives"),
    "whole_post_cost": ("whole_post_cost",),
    "fidelity_rank": ("fidelity_rank",),
    "lexical_baselines": ("lexical_baselines", "lexical_baselines_real"),
    "learning_curve": ("learning_curve", "learning_curve_real"),
    "busy_threads": ("busy_threads",),
}
NAMES = {name: module for module, files in MEASURES.items() for name in (*files, module)}
# The options whose default depends on the measure: these, unless its module's DEFAULTS says
# otherwise. A list there takes several values (a case each); elsewhere the option takes one.
DEFAULTS = {"runs": 5, "posts": REAL_POSTS, "max_length": 128, "seeds": 5, "clarity": CLARITY}


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
        "--runs",
        type=int,
        help="runs of each measure (default 5, or its DEFAULTS'): rounds of alternated sides; "
        "calibration: seeds per clarity; first_looks: simulated seeds; search_budget: repeats "
        "(at least 5); memory: runs of its headline case (one of each other case)",
    )
    parser.add_argument("--data-dir", help="real ReDSM5 files (default: generated sample data)")
    parser.add_argument(
        "--machine-use",
        help="what else ran on the machine meanwhile, recorded in every results file "
        f"(default: {MACHINE_USE['text']!r})",
    )
    sample = parser.add_argument_group(
        "the calibrated realistic sample",
        "calibration, seed_ensemble, portfolio_moves and whole_post; where a measure's defaults "
        "differ from these, its module's DEFAULTS say so",
    )
    sample.add_argument(
        "--posts", type=int, help=f"generated posts (default {REAL_POSTS}, the real set's)"
    )
    sample.add_argument(
        "--max-length", type=int, help=f"tokens a text is cut to (default {DEFAULTS['max_length']})"
    )
    sample.add_argument(
        "--seeds", type=int, help=f"training seeds of an arm or point (default {DEFAULTS['seeds']})"
    )
    sample.add_argument(
        "--clarity",
        type=float,
        nargs="+",
        metavar="C",
        help="share of symptom evidence in the symptom's own words (default: the shipped "
        f"{CLARITY}); calibration takes several, a case each",
    )
    searches = parser.add_argument_group("search_budget and pruning_regret")
    searches.add_argument(
        "--share",
        default="full",
        choices=("full", "mid", "quick"),
        help="the real job's size (days here for search_budget, an hour for pruning_regret) or "
        "a small share (about an hour, a quarter of one); search_budget also a third of it (mid: "
        "about two hours)",
    )
    searches.add_argument(
        "--resume",
        action="store_true",
        help="search_budget: keep the arms a cut-short run finished (each records its commit); "
        "pruning_regret: replay the committed curves again instead of retraining them",
    )
    searches.add_argument(
        "--plan",
        action="store_true",
        help="search_budget: print how long a run of --share takes here, and run nothing",
    )
    searches.add_argument(
        "--trial-seconds",
        type=float,
        help="--plan: one standard-recipe trial's seconds (default: calibration_c075.json's)",
    )
    own = parser.add_argument_group("one measure's own")
    own.add_argument(
        "--baseline",
        metavar="COMMIT",
        help="startup: also time hpo tune at COMMIT (a git worktree of it) in every round; "
        "whole_post_cost: whole_post's epoch at COMMIT",
    )
    own.add_argument(
        "--profile",
        action="store_true",
        help="startup: profile one hpo tune with py-spy into startup.json's details instead",
    )
    own.add_argument(
        "--postgres",
        default=os.environ.get(
            "HPO_BENCH_POSTGRES", "postgresql+psycopg2://postgres@127.0.0.1:5432/hpo_bench"
        ),
        help="p3's PostgreSQL database (default: $HPO_BENCH_POSTGRES, else hpo_bench on "
        "127.0.0.1:5432)",
    )
    own.add_argument("--epochs", type=int, help="calibration: epochs (default: the recipe's)")
    own.add_argument(
        "--first-seed", type=int, default=0, help="calibration: go on from the seeds a file holds"
    )
    own.add_argument(
        "--precision",
        default="auto",
        choices=("auto", "bf16", "no"),
        help="calibration: mixed_precision as a spec sets it (auto: bf16 where the CPU has "
        "native bf16 units, float32 elsewhere)",
    )
    own.add_argument(
        "--name", help="calibration, whole_post: its results file (default: the measure's own)"
    )
    own.add_argument(
        "--moves", type=int, default=5, help="portfolio_moves: portfolio points after the recipe"
    )
    own.add_argument(
        "--skip-moves",
        type=int,
        default=0,
        help="portfolio_moves: leave out the first N moves (another file measured them); the "
        "results file is named _afterN",
    )
    own.add_argument(
        "--evidence-seeds", type=int, default=1, help="whole_post: seeds of the evidence model"
    )
    own.add_argument(
        "--parallel",
        type=int,
        default=2,
        help="whole_post, portfolio_moves, fold_thresholds: runs at a time, each a process",
    )
    own.add_argument(
        "--threads",
        type=int,
        default=1,
        help="whole_post, whole_post_cost, portfolio_moves, fold_thresholds: torch threads a run",
    )
    own.add_argument(
        "--configs", type=int, help="fidelity_rank: configurations drawn besides the recipe (30)"
    )
    own.add_argument(
        "--jobs", type=int, help="fidelity_rank: runs at a time (default 8 on CUDA, else 1)"
    )
    own.add_argument(
        "--arms",
        nargs="+",
        choices=(
            "head_tail",
            "head_tail + hard negatives",
            "whole_post",
            "whole_post + sentence loss",
            "whole_post + sentence loss, sqrt",
            "whole_post + sentence loss + hard negatives, sqrt",
        ),
        help="whole_post: the arms to run (default all; head_tail is always run, the baseline)",
    )
    own.add_argument(
        "--without-baseline",
        action="store_true",
        help="whole_post: leave head_tail out (each arm reported alone, no gain over it)",
    )
    own.add_argument(
        "--keep-runs",
        action="store_true",
        help="whole_post: read the arms its results file holds on the same data and settings "
        "instead of training them again",
    )
    return parser


def chosen(only: list[str] | None) -> list[str]:
    """The modules ``--only``'s names reach, each once, in run order; every one without names."""
    wanted = {NAMES[name] for name in only} if only else set(MEASURES)
    return [module for module in MEASURES if module in wanted]


def options(measure, args: argparse.Namespace) -> argparse.Namespace:
    """``args`` as ``measure`` reads them: each option left out set to its DEFAULTS, else to
    the ones above; one value where it takes one (a ValueError where several were given)."""
    merged = vars(args).copy()
    for key, default in {**DEFAULTS, **getattr(measure, "DEFAULTS", {})}.items():
        given = merged.get(key)
        if given is None:
            merged[key] = default
        elif isinstance(given, list) and not isinstance(default, list):
            if len(given) > 1:
                option = "--" + key.replace("_", "-")
                raise ValueError(f"{measure.NAME} takes one {option}; give several to calibration")
            merged[key] = given[0]
    return argparse.Namespace(**merged)


def main() -> None:
    cli = parser()
    args = cli.parse_args()
    import optuna  # after parsing: --help and a wrong name answer at once

    measures = [importlib.import_module(f"bench.{module}") for module in chosen(args.only)]
    try:  # every measure's options checked before any runs
        runs = [(measure, options(measure, args)) for measure in measures]
    except ValueError as error:
        cli.error(str(error))
    if args.machine_use:
        MACHINE_USE["text"] = args.machine_use
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    shutil.rmtree(RUNS / "studies", ignore_errors=True)
    # no tokenization carried over from an earlier run
    shutil.rmtree(RUNS / "cache", ignore_errors=True)
    for measure, measure_args in runs:
        measure.measure(measure_args)


if __name__ == "__main__":
    main()
