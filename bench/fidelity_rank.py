"""Which cheap *complete* training run ranks configurations as full training does?

The recipe and ``--configs`` configurations drawn (seed 0, plain ``random``) from
studies/criteria-supermax.yaml's search space, restricted to MiniLM, ``adapter: full``,
multilabel or pairs and the real job's 256 tokens (every other range as the spec has it, its
``train`` fields too: threshold fixed, early stopping after 2 stale epochs). Each is trained
FULL and at each low fidelity, every one a complete run with its own warm-up and decay:
share25 / share50 (``train_share``: that stratified share of the training posts, validation
whole), epoch1 (one epoch, all posts), len128 (half the tokens); first_look is the FULL run's
validation value at its epoch 1 (a pause in a long schedule), recorded for free.

    python -m bench.run --only fidelity_rank                         # runs, then the summary
    python -m bench.fidelity_rank --data DIR --encoder PATH --configs 30 --jobs 8 --runs DIR
    python -m bench.fidelity_rank --summary --runs DIR --out FILE   # from whatever finished

The second form is for a lent GPU machine without optuna (bench/fidelity_device.sh); its
results file records the bench.run command that does the same. Each run is its own process
(``--one JOB OUT``), its record written to ``--runs`` as it ends, so a cut-short bench still
yields a summary of the configurations it finished (bench/fidelity_replay.py: Spearman with
FULL, cost ratios, ASHA promotions and a budget comparison over random orders).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from bench import fidelity_replay as replay
from bench.common import REPO, RUNS
from bench.results import MACHINE_USE, commit, write_results
from bench.workload import RECIPE, SPLIT, encoder_path, sample_data

NAME = "fidelity_rank"
DEFINITION = (
    "replayed: Spearman rank correlation of a cheap complete run's validation post macro-F1 "
    "with full training's, over drawn supermax configurations (MiniLM, full fine-tuning)"
)
DEFAULTS = {"max_length": 256}  # the real job's tokens
SPACE = REPO / "studies" / "criteria-supermax.yaml"
FORMULATIONS = ("multilabel", "pairs")  # whole_post left out: its runs are the slow ones
FIDELITIES = ("full", "share50", "share25", "len128", "epoch1")  # a configuration's run order
LOW = ("share25", "share50", "epoch1", "len128", "first_look")
ETAS, BUDGETS, ORDERS = (3, 4), (4, 8, 16), 1000
FOLDER = RUNS / NAME


def draw(count: int, length: int, seed: int = 0, max_epochs: int | None = None) -> list[dict]:
    """The recipe (configuration 0), then ``count`` configurations drawn from the spec's search
    space: each parameter in the spec's order, a conditional one only where its ``when`` holds."""
    space = yaml.safe_load(SPACE.read_text())["search_space"]
    fixed = {"adapter": "full", "max_length": length}
    space = {k: v for k, v in space.items() if k not in {"encoder", *fixed}}
    space["criteria_formulation"] = {"type": "categorical", "choices": list(FORMULATIONS)}
    rng = random.Random(seed)
    configs = [{**RECIPE, "criteria_formulation": "multilabel", **fixed}]
    for _ in range(count):
        params = dict(fixed)
        for conditional in (False, True):
            for name, p in space.items():
                when = p.get("when")
                if bool(when) != conditional or not _holds(when or {}, params):
                    continue
                params[name] = _sample(p, rng)
        configs.append(params)
    if max_epochs:  # a test's tiny scale
        configs = [{**c, "epochs": min(c["epochs"], max_epochs)} for c in configs]
    return configs


def _holds(when: dict, params: dict) -> bool:
    return all(
        params.get(key) in (value if isinstance(value, list) else [value])
        for key, value in when.items()
    )


def _sample(p: dict, rng: random.Random):
    if p["type"] == "categorical":
        return rng.choice(p["choices"])
    if p["type"] == "int":
        return rng.randint(p["low"], p["high"])
    if p.get("log"):
        return math.exp(rng.uniform(math.log(p["low"]), math.log(p["high"])))
    return rng.uniform(p["low"], p["high"])


def settings(params: dict, fidelity: str, encoder: str, data: str, cache: str) -> dict:
    """TrainConfig's fields for one run: the spec's fixed ``train`` fields, the recipe's
    split, the configuration and the fidelity's change to it."""
    train = yaml.safe_load(SPACE.read_text())["train"]
    train.pop("cache_dir", None)
    change = {
        "full": {},
        "share25": {"train_share": 0.25},
        "share50": {"train_share": 0.5},
        "epoch1": {"epochs": 1},
        "len128": {"max_length": params["max_length"] // 2},
    }[fidelity]
    return {
        "task": "criteria",
        "encoder": encoder,
        "data_dir": data,
        "objective_metric": "post_macro_f1",
        "split_fractions": list(SPLIT),
        "split_seed": 0,
        "seed": 0,
        "cache_dir": cache,
        **train,
        **params,
        **change,
    }


def one(job: str, out: str) -> None:
    """The child process's whole job: train one run and write its record to ``out``."""
    import torch

    from hpo.train.config import TrainConfig
    from hpo.train.loop import train

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    job = json.loads(Path(job).read_text())
    config = TrainConfig(**job["settings"])
    epochs, started = [], time.perf_counter()

    def report(step: int, value: float, metrics: dict) -> None:
        ap = metrics.get("average_precision")
        epochs.append({"epoch": step, "value": round(value, 4),
                       "average_precision": None if ap is None else round(ap, 4),
                       "seconds": round(time.perf_counter() - started, 2)})  # fmt: skip

    result = train(config, report=report)
    ap = result.metrics.get("average_precision")
    record = {
        **{k: job[k] for k in ("config", "fidelity", "params")},
        "value": round(result.value, 4),
        "average_precision": None if ap is None else round(ap, 4),
        "wall_seconds": round(result.wall_seconds, 2),
        "process_seconds": round(time.time() - job["started"], 2),
        "setup_seconds": round(result.setup_seconds, 2),
        "epoch1_value": epochs[0]["value"],
        "epoch1_seconds": epochs[0]["seconds"],
        "epochs": epochs,
        "best_epoch": result.best_epoch,
        "epochs_run": result.epochs_run,
        "micro_batch_size": result.micro_batch_size,
        "peak_memory_mb": round(result.peak_memory_mb),
        "commit": commit(),
    }
    Path(out).write_text(json.dumps(record, indent=1))


CHILDREN: set[subprocess.Popen] = set()


def _stop(signum, frame) -> None:  # a wall cap's SIGTERM: no run goes on without its parent
    for child in list(CHILDREN):
        child.terminate()
    for child in list(CHILDREN):
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
    print(f"[{NAME}] stopped by signal {signum}; the finished runs are kept", flush=True)
    os._exit(124)


def launch(args) -> Path:
    """Every (configuration, fidelity) run not already in ``args.runs``, ``args.jobs`` at a time,
    configuration by configuration (a cut-short bench leaves whole configurations)."""
    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    encoder = str(Path(args.encoder or encoder_path()[0]).resolve())  # children run in REPO
    data = str(Path(args.data).resolve())
    configs = draw(args.configs, args.length, args.seed, args.max_epochs)
    cache = str(runs.parent / f"{runs.name}-cache")
    (runs / "plan.json").write_text(json.dumps({
        "configs": configs, "encoder": encoder, "encoder_dtype": stored_dtype(encoder),
        "data": args.data, "jobs": args.jobs, "draw_seed": args.seed,
        "max_epochs": args.max_epochs, "fidelities": list(args.fidelities),
    }, indent=1))  # fmt: skip
    jobs = [(c, f) for c in range(len(configs)) for f in FIDELITIES if f in args.fidelities]
    threads = str(max(1, (os.cpu_count() or 1) // args.jobs))
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": path}  # fmt: skip
    started, done = time.perf_counter(), []
    signal.signal(signal.SIGTERM, _stop)

    def run(job: tuple[int, str]) -> None:
        config, fidelity = job
        slug = f"c{config:03d}-{fidelity}"
        out = runs / f"{slug}.json"
        if out.exists():
            return
        spec = runs / f"{slug}.job"
        spec.write_text(json.dumps({
            "config": config, "fidelity": fidelity, "params": configs[config],
            "settings": settings(configs[config], fidelity, encoder, data, cache),
            "started": time.time(),
        }))  # fmt: skip
        command = [sys.executable, "-m", "bench.fidelity_rank", "--one", str(spec), str(out)]
        with (runs / f"{slug}.log").open("w") as log:
            child = subprocess.Popen(command, env=env, cwd=REPO, stdout=log, stderr=log)
            CHILDREN.add(child)
            code = child.wait()
            CHILDREN.discard(child)
        done.append(slug)
        said = json.loads(out.read_text())["value"] if out.exists() else f"failed ({code})"
        print(f"[{NAME}] {slug}: {said}  ({len(done)}/{len(jobs)}, "
              f"{time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(run, jobs))
    return runs


def stored_dtype(encoder: str) -> str | None:
    """The dtype of the encoder's stored weights (a float16 copy still trains in float32)."""
    path = Path(encoder) / "model.safetensors"
    if not path.exists():
        return None
    with path.open("rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    floats = (v["dtype"] for k, v in header.items() if k != "__metadata__")
    return next((dtype for dtype in floats if dtype.startswith(("F", "BF"))), None)


def collect(runs: Path) -> tuple[dict, dict[int, dict[str, dict]]]:
    """The plan and every finished run, by configuration and fidelity; first_look from FULL's
    epoch 1 (its cost: FULL's seconds to that evaluation)."""
    plan = json.loads((runs / "plan.json").read_text())
    found: dict[int, dict[str, dict]] = {}
    for path in sorted(runs.glob("c*.json")):
        run = json.loads(path.read_text())
        found.setdefault(run["config"], {})[run["fidelity"]] = run
    for by in found.values():
        if "full" in by:
            full = by["full"]
            by["first_look"] = {
                "value": full["epoch1_value"],
                "wall_seconds": full["epoch1_seconds"],
            }
    return plan, found


def rank(found: dict[int, dict[str, dict]], orders: int = ORDERS) -> dict[str, dict]:
    """Per low fidelity, over the configurations that finished it and FULL: the figures."""
    table = {}
    for fidelity in LOW:
        both = [by for _, by in sorted(found.items()) if "full" in by and fidelity in by]
        if not both:
            continue
        full = [by["full"]["value"] for by in both]
        low = [by[fidelity]["value"] for by in both]
        full_cost = [by["full"]["wall_seconds"] for by in both]
        low_cost = [by[fidelity]["wall_seconds"] for by in both]
        continues = fidelity == "first_look"
        runs = replay.orders(len(both), orders)
        rho = replay.spearman(low, full)
        ratios = [lc / fc for lc, fc in zip(low_cost, full_cost, strict=True)]
        record = {
            "configurations": len(both),
            "spearman_with_full": None if rho is None else round(rho, 4),
            "cost_ratio": round(statistics.median(ratios), 4),
        }
        budgets = {}
        for eta in ETAS:
            promo = replay.promotion_replay(low, full, low_cost, full_cost, eta, runs, continues)
            record |= {f"{k}_eta{eta}": v for k, v in promo.items()}
            budgets[f"eta{eta}"] = replay.budget_replay(
                low, full, low_cost, full_cost, BUDGETS, eta, runs, continues
            )
        record["budgets"] = budgets
        record["interval"] = replay.spearman_interval(low, full)
        table[fidelity] = record
    return table


def summarize(runs: Path, out: str | None, ran_on: str | None = None) -> Path:
    """The results file from whatever runs finished (written to bench/results, and copied to
    ``out``); needs neither optuna nor pydantic. ``ran_on``: a results file written where the
    runs ran, whose machine and versions replace this one's (the summary is arithmetic)."""
    plan, found = collect(runs)
    table = rank(found)
    if not table:  # an empty results file would only break the report
        raise SystemExit(f"{runs}: no configuration finished FULL and a low fidelity yet")
    fulls = [by["full"] for by in found.values() if "full" in by]
    length = plan["configs"][0]["max_length"]
    budgets = {fidelity: record.pop("budgets") for fidelity, record in table.items()}
    intervals = {fidelity: record.pop("interval") for fidelity, record in table.items()}
    path = write_results(
        NAME,
        {
            "encoder": f"all-MiniLM-L6-v2 ({plan['encoder']}), weights stored in "
            f"{plan['encoder_dtype']} and loaded as float32 (a float16 copy travels to the GPU)",
            "data": f"{plan['data']}, split {SPLIT} by post (split seed 0), training seed 0",
            "configurations": f"the recipe and {len(plan['configs']) - 1} drawn (seed "
            f"{plan['draw_seed']}) from {SPACE.name}: MiniLM, adapter full, {FORMULATIONS}, "
            f"max_length {length}, the spec's train fields",
            "finished": f"{sum(map(len, found.values())) - len(fulls)} runs over {len(found)} "
            f"configurations ({len(fulls)} with FULL)",
            "parallel": f"{plan['jobs']} runs at a time on one device; cost: TrainResult's wall "
            "seconds (set-up included, process start not)",
            "replay": f"{ORDERS} random orders of the configurations, shared by every fidelity",
        },
        {fidelity: [record] for fidelity, record in table.items()},
        "spearman_with_full",
        definition=DEFINITION,
        also=tuple(k for k in next(iter(table.values()), {}) if k != "spearman_with_full"),
        details={
            "spearman_interval_95 (bootstrap over configurations)": intervals,
            "budgets (replayed; mean best full value: random full vs screened)": budgets,
            "full_value_range": [min(r["value"] for r in fulls), max(r["value"] for r in fulls)]
            if fulls else None,
            "full_median_wall_seconds": statistics.median(r["wall_seconds"] for r in fulls)
            if fulls else None,
            "runs": [run for by in found.values() for f, run in by.items() if f != "first_look"],
            "configs": plan["configs"],
        },
        fewer_runs={"at_least": 1, "why": "one rank correlation over >= 20 configurations, as "
                    "the issue asks; its spread: the bootstrap interval over them"},  # fmt: skip
        command=f"python -m bench.run --only {NAME} --data-dir {plan['data']} --configs "
        f"{len(plan['configs']) - 1} --jobs {plan['jobs']} --max-length {length}",
    )  # fmt: skip
    if ran_on:
        result, there = json.loads(path.read_text()), json.loads(Path(ran_on).read_text())
        result.update(machine=there["machine"], versions=there["versions"])
        result["workload"]["machine_use"] = there["workload"]["machine_use"]
        path.write_text(json.dumps(result, indent=1) + "\n")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, out)
    return path


def measure(args) -> None:
    """bench.run's face: the generated realistic sample at ``args.posts``, every run, then the
    summary."""
    data = args.data_dir or sample_data(f"{NAME}/data-{args.posts}", args.posts)
    own = argparse.Namespace(
        data=data, encoder=None, configs=args.configs or 30, jobs=args.jobs or default_jobs(),
        runs=str(FOLDER / "runs"), length=args.max_length, seed=0, max_epochs=None,
        fidelities=FIDELITIES,
    )  # fmt: skip
    summarize(launch(own), None)


def default_jobs() -> int:
    import torch

    return 8 if torch.cuda.is_available() else 1


def _device_cli() -> None:  # bench.run is every measure's face; this, a lent machine's
    cli = argparse.ArgumentParser(prog="python -m bench.fidelity_rank", description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    cli.add_argument("--one", nargs=2, metavar=("JOB", "OUT"), help="one run (the children's)")
    cli.add_argument("--summary", action="store_true", help="only the summary of --runs")
    cli.add_argument("--data", help="ReDSM5-format folder (default: the generated real-size one)")
    cli.add_argument("--encoder", help="encoder folder (default: the MiniLM package's)")
    cli.add_argument("--configs", type=int, default=30, help="drawn besides the recipe")
    cli.add_argument("--jobs", type=int, help="runs at a time (default 8 on CUDA, else 1)")
    cli.add_argument("--runs", default=str(FOLDER / "runs"), help="per-run records")
    cli.add_argument("--out", help="a copy of the results file")
    cli.add_argument("--length", type=int, default=DEFAULTS["max_length"], help="max_length")
    cli.add_argument("--seed", type=int, default=0, help="the draw's seed")
    cli.add_argument("--max-epochs", type=int, help="cap every configuration's epochs (tests)")
    cli.add_argument("--fidelities", nargs="+", default=FIDELITIES, choices=FIDELITIES)
    cli.add_argument("--machine-use", help="what else ran on the machine, for the results file")
    cli.add_argument("--ran-on", help="--summary elsewhere: the runs' machine, from its results")
    args = cli.parse_args()
    if args.machine_use:
        MACHINE_USE["text"] = args.machine_use
    if args.one:
        return one(*args.one)
    if not args.summary:
        args.jobs = args.jobs or default_jobs()
        args.data = args.data or sample_data(f"{NAME}/data-1484", 1484)
        launch(args)
    summarize(Path(args.runs), args.out, args.ran_on)


if __name__ == "__main__":
    _device_cli()
