"""The benchmark suite: this service against Trainer.hyperparameter_search and against raw
Optuna, on this machine. Prints each result as a ratio with the command that reproduces it.

    make bench                              # everything (CPU part ~15 min on 2 cores)
    python -m bench.run --only p1 p4        # some of it
    python -m bench.run --data-dir DIR      # real ReDSM5 files instead of generated sample data
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time

import numpy as np
import optuna
import torch

from bench.common import (
    FRACTIONS,
    POSTS,
    RUNS,
    encoder_path,
    hpo_cmd,
    sample_data,
    save,
    timed_run,
    write_spec,
)
from hpo.launcher import available_cpus
from hpo.models.hardware import cpu_has_native_bf16

TARGETS = {"formulations": "tokens >= 5x fewer", "p1": "<= 0.4", "p2": "<= 0.5 s", "p3": "<= 1.1", "p4": ">= 0.9", "p5": ">= 1.5, MFU >= 35%", "p6": "<= 0.5", "p7": "<= 0.5 of the budget", "determinism": "measured",
           "startup": "measured, cut"}
SEARCH_SPACE = {"learning_rate": {"type": "float", "low": 2e-5, "high": 2e-4, "log": True},
                "weight_decay": {"type": "float", "low": 0.0, "high": 0.1}}


def service_spec(name: str, data_dir: str, encoder: str, n_trials: int, **overrides) -> str:
    train = {"encoder": encoder, "epochs": 1, "max_length": 128, "batch_size": 16, "warmup_ratio": 0.0,
             "split_fractions": list(FRACTIONS), "class_weighting": "balanced", "cache_dir": str(RUNS / "cache")}
    train.update(overrides.pop("train", {}))
    fields = {"task": "criteria", "data_dir": data_dir, "n_trials": n_trials, "keep_top_k": 0,
              "storage": f"sqlite:///{RUNS / 'bench.db'}", "output_dir": str(RUNS / "studies"),
              "sampler": {"name": "tpe", "seed": 0}, "pruner": {"name": "none"}, "train": train,
              "search_space": SEARCH_SPACE, **overrides}
    return str(write_spec(name, **fields))


def load(name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{RUNS / 'bench.db'}")


# CPU figures twice: at the machine's best precision (bf16 autocast where the CPU has native
# bf16, else float32) and in float32 (mixed_precision: no), the precision every CPU has.
PRECISIONS = {"best": "auto", "float32": "no"}
# The service's criteria formulation: each post read once for nine logits (the real data's
# best, README "The tasks"), against the (criterion, post) pairs a two-class Trainer takes.
SERVICE_TRAIN = {"criteria_formulation": "multilabel"}


def p1_end_to_end(encoder: str, data_dir: str) -> dict:
    """Same checkpoint, data, split, search space and objective (post-level macro-F1), 2
    trials x 1 epoch: wall time of each command, per precision. The service with the same
    (criterion, post) pairs as the Trainer is measured too, to show what each lever gives."""
    bf16 = cpu_has_native_bf16() and not torch.cuda.is_available()
    trainer_runs, runs = {}, {}
    for label, precision in PRECISIONS.items():
        trainer_bf16 = bf16 and label == "best"
        if trainer_bf16 not in trainer_runs:  # without native bf16 both precisions are float32: one run
            trainer_runs[trainer_bf16] = _trainer_search(encoder, data_dir, trainer_bf16)
        trainer = trainer_runs[trainer_bf16]
        service = _service_search(f"p1-{label}", encoder, data_dir, {**SERVICE_TRAIN, "mixed_precision": precision})
        runs[label] = {"ratio": service["seconds"] / trainer["seconds"], "service": service, "trainer": trainer,
                       "precision": "bf16" if bf16 and label == "best" else "float32"}
    pairs = _service_search("p1-pairs", encoder, data_dir, {"criteria_formulation": "pairs", "mixed_precision": "no"})
    return {"ratio": runs["best"]["ratio"], "float32_ratio": runs["float32"]["ratio"], "native_bf16": bf16,
            "runs": runs, "pairs_float32": {**pairs, "ratio": pairs["seconds"] / runs["float32"]["trainer"]["seconds"]},
            "command": f"python -m bench.trainer_baseline {encoder} {data_dir} --trials 2 --epochs 1 --max-length 128"
                       f" --out t.json  vs  hpo tune {RUNS / 'specs' / 'p1-best.yaml'} --workers 2"}


def _trainer_search(encoder: str, data_dir: str, bf16: bool) -> dict:
    out = RUNS / f"p1-trainer{'-bf16' if bf16 else ''}.json"
    cmd = [sys.executable, "-m", "bench.trainer_baseline", encoder, data_dir, "--trials", "2", "--epochs", "1",
           "--max-length", "128", "--out", str(out), *(["--bf16"] if bf16 else [])]
    seconds, _ = timed_run(cmd)
    result = json.loads(out.read_text())
    return {"seconds": seconds, "best_post_macro_f1": result["best_post_macro_f1"],
            "train_tokens_per_epoch": result["train_tokens_per_epoch"], "train_examples": result["train_examples"]}


def _service_search(name: str, encoder: str, data_dir: str, train: dict, workers: int = 2) -> dict:
    spec = service_spec(name, data_dir, encoder, n_trials=2, metric="post_macro_f1", train=train)
    seconds, _ = timed_run(hpo_cmd("tune", spec, "--workers", str(workers), "--no-progress"))
    study = load(name)
    trials = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    return {"seconds": seconds, "best_post_macro_f1": study.best_value, "train": train,
            "train_tokens_per_epoch": int(np.mean([t.user_attrs["tokens_trained"] for t in trials]))}


def p4_scaling(encoder: str, data_dir: str, trials_per_worker: int = 4) -> tuple[dict, dict]:
    """Parallel efficiency: trials per second of N single-thread workers on N cores, over N x
    those of one single-thread worker, from the trials' own start and end times (the
    launcher's start-up is its own figure). The old ratio (2 workers vs 1, each with its
    share of the cores, same trials) is kept for information. P2 comes from the 1-worker run."""
    n = available_cpus()
    rate = {}
    for workers in (1, n):
        name = f"p4-{workers}x1"
        spec = service_spec(name, data_dir, encoder, n_trials=workers * trials_per_worker, train=SERVICE_TRAIN)
        timed_run(hpo_cmd("tune", spec, "--workers", str(workers), "--threads", "1", "--no-progress"))
        rate[workers] = _trials_per_second(load(name))
    walls = {}
    for workers in (1, 2):  # the old P4: all cores either way, split between the workers
        spec = service_spec(f"p4-w{workers}", data_dir, encoder, n_trials=4, train=SERVICE_TRAIN)
        walls[workers], _ = timed_run(hpo_cmd("tune", spec, "--workers", str(workers), "--no-progress"))
    trials = sorted(load("p4-1x1").get_trials(states=(optuna.trial.TrialState.COMPLETE,)), key=lambda t: t.number)
    setups = [t.user_attrs["setup_seconds"] for t in trials]
    p2 = {"first_trial_seconds": setups[0], "later_trials_seconds": max(setups[1:]), "all": setups,
          "command": f"hpo tune {RUNS / 'specs' / 'p4-1x1.yaml'} --workers 1 --threads 1   # user attr setup_seconds"}
    p4 = {"ratio": rate[n] / (n * rate[1]), "workers": n, "trials_per_hour_1x1": rate[1] * 3600,
          "trials_per_hour_parallel": rate[n] * 3600, "old_ratio": walls[1] / walls[2],
          "old_seconds": {"1_worker": walls[1], "2_workers": walls[2]}, "cores": n,
          "command": f"hpo tune {RUNS / 'specs' / 'p4-1x1.yaml'} --workers 1 --threads 1  vs  "
                     f"{RUNS / 'specs' / f'p4-{n}x1.yaml'} --workers {n} --threads 1"}
    return p2, p4


def _trials_per_second(study: optuna.Study) -> float:
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    span = max(t.datetime_complete for t in done) - min(t.datetime_start for t in done)
    return len(done) / span.total_seconds()


def p6_pruning(encoder: str, data_dir: str) -> dict:
    """Epochs spent until the study first reaches its best value, with the median pruner and
    without. A random sampler with one seed proposes the same trials to both studies, and
    training is deterministic, so the pruner can only skip epochs, not change trials."""
    common = dict(task="evidence", sampler={"name": "random", "seed": 0}, train={"epochs": 4, "max_length": 64},
                  search_space={"learning_rate": {"type": "float", "low": 1e-5, "high": 1e-3, "log": True}})
    runs = {}
    for pruner in ("median", "none"):  # a second run of the same pruner would resume, so fresh names
        options = {"n_startup_trials": 3, "n_warmup_steps": 1} if pruner == "median" else {}
        spec = service_spec(f"p6-{pruner}", data_dir, encoder, n_trials=12, pruner={"name": pruner, "options": options},
                            **common)
        timed_run(hpo_cmd("tune", spec, "--workers", "1", "--no-progress"))
        trials = sorted(load(f"p6-{pruner}").get_trials(), key=lambda t: t.number)
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
    reached = "median" in spent
    return {"ratio": spent["median"] / spent["none"] if reached else None, "best_value": best,
            "epochs_to_best_with_pruner": spent.get("median"), "epochs_to_best_without": spent["none"],
            "pruner_reached_best": reached, "total_epochs": {p: sum(e for e, _, _ in t) for p, t in runs.items()},
            "command": f"hpo tune {RUNS / 'specs' / 'p6-median.yaml'} --workers 1  vs  p6-none.yaml"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", choices=list(TARGETS))
    parser.add_argument("--data-dir", help="real ReDSM5 files (default: generated sample data)")
    parser.add_argument("--postgres", default=os.environ.get("HPO_BENCH_POSTGRES",
                                                             "postgresql+psycopg2://postgres@127.0.0.1:5432/hpo_bench"))
    args = parser.parse_args()
    only = set(args.only or TARGETS)
    shutil.rmtree(RUNS / "studies", ignore_errors=True)
    shutil.rmtree(RUNS / "cache", ignore_errors=True)  # no tokenization carried over from an earlier run
    (RUNS / "bench.db").unlink(missing_ok=True)
    encoder, encoder_name = encoder_path()
    data_dir = sample_data("data", POSTS, args.data_dir)
    results: dict = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                                f"torch {torch.__version__}", "encoder": encoder_name, "data": data_dir,
                     "started": time.strftime("%Y-%m-%d %H:%M")}
    if "formulations" in only:
        from bench.formulations import formulations

        results["formulations"] = formulations(encoder, sample_data("data-formulations", 300, args.data_dir))
    if "p1" in only:
        results["p1"] = p1_end_to_end(encoder, data_dir)
    if only & {"p2", "p4"}:
        results["p2"], results["p4"] = p4_scaling(encoder, data_dir)
    if "startup" in only:
        from bench.startup import startup

        results["startup"] = startup(encoder, data_dir)
    if "p3" in only:
        from bench.orchestration import p3_orchestration

        results["p3"] = p3_orchestration(args.postgres)
    if "p5" in only:
        from bench.gpu import p5_gpu

        results["p5"] = p5_gpu()
    if "p6" in only:
        results["p6"] = p6_pruning(encoder, sample_data("data-p6", 60, args.data_dir))
    if "p7" in only:
        from bench.common import tiny_encoder
        from bench.p7 import p7_search

        results["p7"] = p7_search(tiny_encoder(), sample_data("data-p7", 150, args.data_dir))
    if "determinism" in only:
        from bench.p7 import determinism_cost

        results["determinism"] = determinism_cost(encoder, sample_data("data-p6", 60, args.data_dir))
    if args.only and (RUNS / "results.json").exists():  # a partial run updates the last full one
        results = {**json.loads((RUNS / "results.json").read_text()), **results}
    path = save(results)
    report(results, path)


def report(results: dict, path) -> None:
    print(f"\nhpo benchmarks on {results['machine']}; encoder {results['encoder']}")
    lines = {
        "formulations": lambda r: "Criteria per training epoch, pairs / multilabel: " + (
            f"{r['ratio']:.1f}x the encoder tokens, {r['time_ratio']:.1f}x the time (max_length {r['max_length']}); "
            + "; ".join(f"{name}: {v['train_tokens_per_epoch']:,} tokens {v['epoch_seconds']:.0f} s, "
                        f"{v['token_coverage']:.0%} of tokens seen, post macro/micro-F1 {v['post_macro_f1']:.3f}/"
                        f"{v['post_micro_f1']:.3f}" for name, v in r["variants"].items())),
        "p1": lambda r: "P1 end-to-end wall time, service / Trainer.hyperparameter_search: " + "; ".join(
            f"{label} ({run['precision']}) {run['ratio']:.2f}x ({run['service']['seconds']:.1f} s vs "
            f"{run['trainer']['seconds']:.1f} s), best post macro-F1 {run['service']['best_post_macro_f1']:.3f} vs "
            f"{run['trainer']['best_post_macro_f1']:.3f}, training tokens per epoch "
            f"{run['service']['train_tokens_per_epoch']:,} vs {run['trainer']['train_tokens_per_epoch']:,}"
            for label, run in r["runs"].items()) + f"; service on the Trainer's pairs (float32): "
            f"{r['pairs_float32']['ratio']:.2f}x ({r['pairs_float32']['seconds']:.1f} s), best post macro-F1 "
            f"{r['pairs_float32']['best_post_macro_f1']:.3f}",
        "p2": lambda r: f"P2 trial set-up (start to first optimizer step): first trial {r['first_trial_seconds']:.2f} s, "
                        f"later trials at most {r['later_trials_seconds']:.2f} s",
        "p3": lambda r: r.get("skipped") or (f"P3 orchestration per trial at trial {r['at_trial']}, service / raw Optuna: "
                        f"{r['ratio']:.2f}x (medians {r['service_ms']:.1f} ms vs {r['raw_ms']:.1f} ms; runs "
                        + ", ".join(f"{side} " + "/".join(f"{v:.0f}" for v in ms) for side, ms in r["runs_ms"].items())
                        + "); what the service adds: "
                        + ", ".join(f"{k} {v:.1f} ms" for k, v in r.get("extra_ms", {}).items())),
        "p4": lambda r: f"P4 parallel efficiency, {r['workers']} single-thread workers / ({r['workers']} x one): "
                        f"{r['ratio']:.2f} ({r['trials_per_hour_parallel']:.0f} vs "
                        f"{r['trials_per_hour_1x1']:.0f} trials/hour); old ratio, 2 workers / 1 worker on all cores: "
                        f"{r['old_ratio']:.2f}x",
        "p5": lambda r: r.get("skipped") or (f"P5 GPU tokens/s, service loop / Trainer: {r['ratio']:.2f}x; "
                        f"MFU {r['mfu']:.0%}"),
        "p6": lambda r: (f"P6 pruning, epochs to reach the best value with / without the pruner: {r['ratio']:.2f}x "
                         f"({r['epochs_to_best_with_pruner']} vs {r['epochs_to_best_without']} epochs; "
                         f"best {r['best_value']:.3f}); whole study {r['total_epochs']['median']} vs "
                         f"{r['total_epochs']['none']} epochs") if r["ratio"] is not None else
                        "P6 pruning: the pruned study did not reach the unpruned best value",
        "startup": lambda r: (f"Start-up, hpo tune with {r['workers']} workers: study created at "
                              f"{r['study_created_seconds']:.1f} s, first trial running at "
                              f"{r['first_trial_running_seconds']:.1f} s, its first optimizer step at "
                              f"{r['first_step_seconds']:.1f} s; alone: "
                              + ", ".join(f"{k} {v:.1f} s" for k, v in r["parts_alone"].items())),
        "determinism": lambda r: (f"deterministic: true costs {r['ratio']:.2f}x the wall time of a trial "
                                  f"({r['seconds']['on']:.1f} s vs {r['seconds']['off']:.1f} s); two deterministic "
                                  f"reruns {'agree bit for bit' if r['bitwise_equal_reruns'] else 'DIFFER'}"),
        "p7": lambda r: (f"P7 search at equal epochs ({r['budget_epochs']}, {r['seeds']} seeds), median best macro-F1 "
                         + "; ".join(f"{name} " + "/".join(f"{v:.3f}" for v in m.values())
                                     for name, m in r["median_best"].items())
                         + " at 25/50/100% of the budget; TPE+pruning reaches random's final median at "
                         + (f"{r['ratio']:.2f}x the budget" if r["ratio"] else "no point of the budget")
                         + f"; 4 workers' simultaneous proposals {r['liar']['plain']:.3f} apart without constant "
                           f"liar, {r['liar']['constant_liar']:.3f} with"),
    }
    for key, line in lines.items():
        if key in results:
            print(f"  {line(results[key])}   [target {TARGETS[key]}]")
            print(f"      reproduce: {results[key].get('command', 'python -m bench.run --only ' + key)}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
