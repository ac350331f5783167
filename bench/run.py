"""The benchmark suite: this service against Trainer.hyperparameter_search and against raw
Optuna, on this machine. Each measure writes ``bench/results/<measure>.json`` (every run's raw
values, median, spread, machine, versions, commit, target and verdict); ``python -m
bench.report`` turns those files into the table in docs/performance.md.

    make bench                              # every measure, 5 runs each
    python -m bench.run --only p1 p4        # some of them
    python -m bench.run --runs 7            # more runs of each
    python -m bench.run --data-dir DIR      # real ReDSM5 files instead of generated sample data
"""

from __future__ import annotations

import argparse
import os
import shutil

import optuna

from bench.common import RUNS, encoder_path, hpo_cmd, sample_data, timed_run, write_spec
from bench.results import MACHINE_USE, write_results

MEASURES = (
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
SEARCH_SPACE = {
    "learning_rate": {"type": "float", "low": 2e-5, "high": 2e-4, "log": True},
    "weight_decay": {"type": "float", "low": 0.0, "high": 0.1},
}
POSTS, FRACTIONS = (
    40,
    (0.6, 0.3, 0.1),
)  # 24 training posts (216 criteria pairs), 12 validation posts


def service_spec(
    name: str, data_dir: str, encoder: str, n_trials: int, storage: str, **overrides
) -> str:
    train = {
        "encoder": encoder,
        "epochs": 1,
        "max_length": 128,
        "batch_size": 16,
        "warmup_ratio": 0.0,
        "split_fractions": list(FRACTIONS),
        "class_weighting": "balanced",
        "mixed_precision": "no",
        "criteria_formulation": "multilabel",
        "cache_dir": str(RUNS / "cache"),
    }
    train.update(overrides.pop("train", {}))
    fields = {
        "task": "criteria",
        "data_dir": data_dir,
        "n_trials": n_trials,
        "keep_top_k": 0,
        "storage": storage,
        "output_dir": str(RUNS / "studies"),
        "sampler": {"name": "tpe", "seed": 0},
        "pruner": {"name": "none"},
        "train": train,
        "search_space": SEARCH_SPACE,
        "metric": "post_macro_f1",
        **overrides,
    }
    return str(write_spec(name, **fields))


def workload(encoder_name: str, data: str, **more) -> dict:
    return {"encoder": encoder_name, "data": data, **more}


def p1(encoder: str, encoder_name: str, data_dir: str | None, runs: int) -> None:
    from bench import p1 as bench_p1

    bench_p1.clean()
    data = _data_words(data_dir, bench_p1.POSTS, FRACTIONS)
    data_dir = sample_data(f"data-{bench_p1.POSTS}", bench_p1.POSTS, data_dir)

    def spec_for(name: str, formulation: str) -> tuple[str, str]:
        return name, service_spec(
            name,
            data_dir,
            encoder,
            bench_p1.TRIALS,
            bench_p1.STORAGE,
            train={
                "epochs": bench_p1.EPOCHS,
                "max_length": bench_p1.MAX_LENGTH,
                "criteria_formulation": formulation,
            },
        )

    rounds = []
    for round_no in range(runs):
        rounds.append(bench_p1.p1_round(round_no, encoder, data_dir, spec_for))
        print(
            f"[p1 round {round_no + 1}] P1 {rounds[-1]['p1_ratio']:.2f}x, time to quality "
            f"{rounds[-1].get('time_to_quality_ratio')}",
            flush=True,
        )
    shape = (
        f"{bench_p1.TRIALS} trials x {bench_p1.EPOCHS} epochs each side, "
        f"max_length {bench_p1.MAX_LENGTH}, "
        "batch 16, search space learning_rate [2e-5, 2e-4] log x weight_decay [0, 0.1], "
        "TPE seed 0, float32, "
        "balanced class weighting on both sides (the Trainer's through compute_loss), "
        "every epoch evaluated"
    )
    load = workload(
        encoder_name,
        data,
        shape=shape,
        rounds=f"{runs} rounds; each runs the three searches in a rotated order",
        service="hpo tune --workers 2 (1 thread each)",
        trainer=(
            "bench/trainer_baseline.py: Trainer.hyperparameter_search, optuna backend, 2 threads"
        ),
    )
    write_results(
        "p1",
        load,
        {"same work": rounds},
        "p1_ratio",
        {"key": "same work", "at_most": 0.4},
        definition="wall time of the whole search, hpo tune --workers 2 on (criterion, post) "
        "pairs / Trainer.hyperparameter_search on the same pairs: same examples, split, epochs, "
        "trials, class weighting",
        also=(
            "trainer_seconds",
            "service_pairs_seconds",
            "trainer_best_post_macro_f1",
            "service_pairs_best_post_macro_f1",
        ),
        command="python -m bench.run --only p1",
    )
    write_results(
        "time_to_quality",
        load,
        {"multilabel vs Trainer": rounds},
        "time_to_quality_ratio",
        {"key": "multilabel vs Trainer", "at_most": 0.2},
        definition="seconds from launch until hpo tune --workers 2 (multilabel: each post read "
        "once for nine logits) first evaluates a post macro-F1 at least the Trainer's best, "
        "over the seconds until Trainer.hyperparameter_search (pairs) first reached its best; "
        "same split",
        also=(
            "trainer_reached_s",
            "service_multilabel_reached_s",
            "target_post_macro_f1",
            "service_multilabel_best_post_macro_f1",
            "service_pairs_quality_ratio",
        ),
        command="python -m bench.run --only p1",
    )


def p4(
    encoder: str, encoder_name: str, data_dir: str, data: str, runs: int, trials: int = 4
) -> None:
    """Trials/hour of 2 workers vs 1 worker at the default thread split (cores / workers), from
    the trials' own start and end times; single-thread efficiency beside it. P2 from the
    1-worker runs."""
    storage = f"sqlite:///{RUNS / 'p4.db'}"
    (RUNS / "p4.db").unlink(missing_ok=True)
    setups = {
        "1 worker": ["--workers", "1"],
        "2 workers": ["--workers", "2"],
        "1 worker, 1 thread": ["--workers", "1", "--threads", "1"],
    }
    rounds, p2_runs = [], []
    for round_no in range(runs):
        rate = {}
        order = list(setups) if round_no % 2 == 0 else list(setups)[::-1]
        for setup in order:
            name = f"p4-{setup.replace(' ', '').replace(',', '-')}-{round_no}"
            spec = service_spec(name, data_dir, encoder, trials, storage)
            timed_run(hpo_cmd("tune", spec, *setups[setup], "--no-progress"))
            done = optuna.load_study(study_name=name, storage=storage).get_trials(
                states=(optuna.trial.TrialState.COMPLETE,)
            )
            span = max(t.datetime_complete for t in done) - min(t.datetime_start for t in done)
            rate[setup] = len(done) / span.total_seconds() * 3600
            if setup == "1 worker":
                later = [
                    t.user_attrs["setup_seconds"] for t in sorted(done, key=lambda t: t.number)[1:]
                ]
                first = min(done, key=lambda t: t.number).user_attrs["setup_seconds"]
                p2_runs.append(
                    {
                        "later_trials_max_s": max(later),
                        "first_trial_s": first,
                        "later_trials_s": later,
                    }
                )
        rounds.append(
            {
                "order": order,
                **{f"trials_per_hour {k}": v for k, v in rate.items()},
                "ratio": rate["2 workers"] / rate["1 worker"],
                "single_thread_efficiency": rate["2 workers"] / (2 * rate["1 worker, 1 thread"]),
            }
        )
        print(f"[p4 round {round_no + 1}] {rounds[-1]['ratio']:.2f}x", flush=True)
    load = workload(
        encoder_name,
        data,
        shape=f"{trials} trials per run, criteria multilabel, 1 epoch, max_length "
        "128, batch 16, float32",
        rounds=f"{runs} rounds; each runs 1 worker, 2 workers and 1 worker with "
        "1 thread, alternating the order",
    )
    write_results(
        "p4",
        load,
        {"2 workers / 1 worker": rounds},
        "ratio",
        {"key": "2 workers / 1 worker", "at_least": 0.9},
        definition="trials/hour of hpo tune --workers 2 over trials/hour of --workers 1, each at "
        "the default thread split (cores / workers), from the trials' own start and end times",
        also=(
            "single_thread_efficiency",
            "trials_per_hour 1 worker",
            "trials_per_hour 2 workers",
            "trials_per_hour 1 worker, 1 thread",
        ),
        command="python -m bench.run --only p4",
    )
    write_results(
        "p2",
        load,
        {"1 worker": p2_runs},
        "later_trials_max_s",
        {"key": "1 worker", "at_most": 0.5},
        definition="a trial's start to its first optimizer step (setup_seconds), the slowest of a "
        "worker's later trials (its first trial tokenizes the data)",
        also=("first_trial_s",),
        command="python -m bench.run --only p4",
    )


def repeated(
    measure: str, fn, runs: int, value: str, target: dict | None, definition: str, load: dict
) -> None:
    """A measure whose one run is a whole function call: ``runs`` calls, each a run."""
    results = []
    for run_no in range(runs):
        results.append(fn())
        print(f"[{measure} run {run_no + 1}] {value} {results[-1].get(value)}", flush=True)
    write_results(
        measure,
        load,
        {measure: results},
        value,
        target and {"key": measure, **target},
        definition=definition,
        command=f"python -m bench.run --only {measure}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="*", choices=MEASURES)
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
        "--postgres",
        default=os.environ.get(
            "HPO_BENCH_POSTGRES", "postgresql+psycopg2://postgres@127.0.0.1:5432/hpo_bench"
        ),
    )
    args = parser.parse_args()
    if args.machine_use:
        MACHINE_USE["text"] = args.machine_use
    only = set(args.only or MEASURES)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    shutil.rmtree(RUNS / "studies", ignore_errors=True)
    # no tokenization carried over from an earlier run
    shutil.rmtree(RUNS / "cache", ignore_errors=True)
    encoder, encoder_name = encoder_path()
    data_dir = sample_data(f"data-{POSTS}", POSTS, args.data_dir)
    data = _data_words(args.data_dir, POSTS, FRACTIONS)
    if "p1" in only:
        p1(encoder, encoder_name, args.data_dir, args.runs)
    if only & {"p2", "p4"}:
        p4(encoder, encoder_name, data_dir, data, args.runs)
    if "startup" in only:
        from bench.startup import startup

        startup(encoder, encoder_name, data_dir, data, args.runs)
    if "p3" in only:
        from bench.orchestration import p3_orchestration

        p3_orchestration(args.postgres, args.runs)
    if "peak_memory" in only:
        from bench.peak_memory import peak_memory

        peak_memory(encoder, encoder_name, args.runs, args.data_dir)
    if "p5" in only:
        from bench.gpu import p5_gpu

        result = p5_gpu()
        if (
            "skipped" in result
        ):  # no results file: the table says "not measured", never a stale figure
            print(result["skipped"])
        else:
            repeated(
                "p5",
                p5_gpu,
                args.runs,
                "ratio",
                {"at_least": 1.5},
                "GPU training tokens/s, service loop / Trainer (roberta-base shape, length 256); "
                "MFU beside it",
                workload(encoder_name, "400 generated realistic posts"),
            )
    if "p6" in only:
        p6_data = sample_data("data-p6", 60, args.data_dir)
        repeated(
            "p6",
            lambda: p6_pruning(encoder, p6_data),
            args.runs,
            "ratio",
            {"at_most": 0.5},
            "epochs spent until the study first reaches its best value, median pruner / no pruner "
            "(evidence, 12 trials x 4 epochs, random sampler seed 0)",
            workload(encoder_name, "60 generated posts"),
        )
    if "p7" in only:
        from bench.common import tiny_encoder
        from bench.p7 import p7_search

        p7_data = sample_data("data-p7", 150, args.data_dir)
        repeated(
            "p7",
            lambda: p7_search(tiny_encoder(), p7_data),
            args.runs,
            "ratio",
            {"at_most": 0.5},
            "share of an equal epoch budget TPE + median pruning needs to reach random search's "
            "final median best (5 seeds each)",
            workload("tiny random-init RoBERTa", "150 generated realistic posts"),
        )
    if "formulations" in only:
        from bench.formulations import formulations

        f_data = sample_data("data-formulations", 300, args.data_dir)
        repeated(
            "formulations",
            lambda: formulations(encoder, f_data),
            args.runs,
            "ratio",
            {"at_least": 5},
            "encoder tokens per training epoch, (criterion, post) pairs / multilabel, "
            "max_length 128",
            workload(encoder_name, "300 generated realistic posts"),
        )
    if "determinism" in only:
        from bench.p7 import determinism_cost

        d_data = sample_data("data-p6", 60, args.data_dir)
        repeated(
            "determinism",
            lambda: determinism_cost(encoder, d_data),
            args.runs,
            "ratio",
            None,
            "wall time of one trial with deterministic: true / without",
            workload(encoder_name, "60 posts"),
        )
    if "search_budget" in only:
        search_budget_measure(
            encoder, encoder_name, args.data_dir, max(sb_repeats(), args.runs), args.resume
        )
    if "pruning_regret" in only:
        pruning_regret_measure(encoder, encoder_name, args.data_dir, args.resume)
    if "sizing" in only:
        from bench.sizing import REDSM5_POSTS, sizing

        write_results(
            "sizing",
            workload(
                "roberta-base and deberta-v3-base shapes, random weights, MiniLM's tokenizer",
                f"{REDSM5_POSTS} generated realistic posts (ReDSM5's count and post lengths)",
                shape="each supermax spec's warm-start recipe, one worker with every core",
            ),
            sizing(encoder),
            "recipe_trial_s",
            None,
            definition="hpo validate --estimate's figures for the spec's standard recipe: "
            "seconds of one trial (set-up + its epochs of training and validation)",
            also=("epoch_s", "study_s"),
            command="python -m bench.run --only sizing",
            fewer_runs=SIZING_RUNS,
        )


def sb_repeats() -> int:
    from bench.search_budget import REPEATS

    return REPEATS


SIZING_RUNS = {
    "at_least": 1,
    "why": "an order of magnitude for the specs' comments: hpo validate --estimate's own "
    "timing of a few optimizer steps per encoder, not a headline",
}


def search_budget_measure(
    encoder: str, encoder_name: str, data_dir: str | None, repeats: int, resume: bool
):
    from bench import search_budget as sb

    (RUNS / "search_budget.db").unlink(missing_ok=True)
    if not resume:
        shutil.rmtree(sb.DONE, ignore_errors=True)
    # the calibrated realistic sample (hpo.fixtures.realistic.CLARITY) at the real set's size
    data = sample_data(f"data-{sb.BUDGET_POSTS}", sb.BUDGET_POSTS, data_dir)
    runs = sb.search_budget(encoder, data, repeats)
    outcome = sb.verdict(runs)
    half = (outcome["a_recipe_test_interval"][1] - outcome["a_recipe_test_interval"][0]) / 2
    write_results(
        "search_budget",
        workload(
            encoder_name, _data_words(data_dir, sb.BUDGET_POSTS, sb.BUDGET_FRACTIONS), **sb.WORKLOAD
        ),
        runs,
        "test_post_macro_f1",
        {
            "key": "c_issue35",
            "figure": "test_post_macro_f1",
            "at_least": round(outcome["a_recipe_test_median"] + half, 4),
        },
        definition="test post macro-F1 of the model each arm ends with, scored once, at one "
        "wall-clock budget; target: (c) beats (a)'s median by more than the half-width of (a)'s "
        "95% interval over repeats; a gain only where (c) - (a)'s interval is above zero",
        also=("validation_post_macro_f1", "wall_s"),
        details=outcome,
        command="python -m bench.run --only search_budget",
    )


def pruning_regret_measure(encoder: str, encoder_name: str, data_dir: str | None, resume: bool):
    from bench import pruning_regret as pr
    from bench import search_budget as sb
    from bench.results import load_all

    data = sample_data(f"data-{sb.POSTS}", sb.POSTS, data_dir)
    earlier = load_all().get("pruning_regret") if resume else None
    if earlier:  # its curves, and the commit that trained them
        earlier = {"curves_commit": earlier["commit"], **earlier["details"]}
    runs, details = pr.pruning_regret(encoder, data, earlier)
    write_results(
        "pruning_regret",
        workload(
            encoder_name,
            _data_words(data_dir, sb.POSTS, sb.FRACTIONS),
            shape=f"the recipe + {pr.CONFIGS} random configurations of bench/search_budget.py's "
            f"space, {pr.EPOCHS} epochs each, replayed through HyperbandPruner "
            f"(max_resource {pr.EPOCHS}, reduction_factor 3); each run: {pr.ORDERS} random orders",
        ),
        runs,
        "best_pruned_share",
        None,
        definition="share of replay orders in which the pruner killed the configuration that "
        "ends best; regret: its final post macro-F1 minus the best kept",
        also=("mean_regret", "epochs_share"),
        details=details,
        command="python -m bench.run --only pruning_regret",
    )


def _data_words(data_dir: str | None, posts: int, fractions) -> str:
    """What a results file's workload says of its data."""
    if data_dir:
        return f"real ReDSM5 files ({data_dir})"
    return (
        f"{posts} generated realistic posts (seed 0; ReDSM5's post lengths), "
        f"split {fractions} by post"
    )


def p6_pruning(encoder: str, data_dir: str) -> dict:
    """Epochs spent until the study first reaches its best value, with the median pruner and
    without. A random sampler with one seed proposes the same trials to both studies, and
    training is deterministic, so the pruner can only skip epochs, not change trials."""
    storage = f"sqlite:///{RUNS / 'p6.db'}"
    (RUNS / "p6.db").unlink(missing_ok=True)
    common = dict(
        task="evidence",
        sampler={"name": "random", "seed": 0},
        train={"epochs": 4, "max_length": 64, "criteria_formulation": "pairs"},
        search_space={"learning_rate": {"type": "float", "low": 1e-5, "high": 1e-3, "log": True}},
        metric="macro_f1",
    )
    runs = {}
    for pruner in ("median", "none"):
        options = {"n_startup_trials": 3, "n_warmup_steps": 1} if pruner == "median" else {}
        spec = service_spec(
            f"p6-{pruner}",
            data_dir,
            encoder,
            12,
            storage,
            pruner={"name": pruner, "options": options},
            **common,
        )
        timed_run(hpo_cmd("tune", spec, "--workers", "1", "--no-progress"))
        trials = sorted(
            optuna.load_study(study_name=f"p6-{pruner}", storage=storage).get_trials(),
            key=lambda t: t.number,
        )
        runs[pruner] = [(t.user_attrs.get("epochs_run", 0), t.value, t.state.name) for t in trials]
    best = max(v for _, v, s in runs["none"] if s == "COMPLETE")
    spent = {}
    for pruner, trials in runs.items():
        total = 0
        for epochs, value, state in trials:
            total += epochs
            if state == "COMPLETE" and value >= best - 1e-9:
                spent[pruner] = total
                break
    return {
        "ratio": spent["median"] / spent["none"] if "median" in spent else None,
        "best_value": best,
        "epochs_to_best_with_pruner": spent.get("median"),
        "epochs_to_best_without": spent["none"],
        "total_epochs_median": sum(e for e, _, _ in runs["median"]),
        "total_epochs_none": sum(e for e, _, _ in runs["none"]),
    }


if __name__ == "__main__":
    main()
