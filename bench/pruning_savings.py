"""P6, what pruning saves: the epochs a study spends until it first reaches its best value, with
the median pruner and without. A random sampler with one seed proposes the same trials to both
studies, and training is deterministic, so the pruner can only skip epochs, not change trials.

    python -m bench.run --only p6
"""

from __future__ import annotations

import optuna

from bench.common import RUNS, hpo_cmd, repeated, timed_run
from bench.workload import described, encoder_path, sample_data, service_spec

NAME = "p6"
DEFINITION = (
    "epochs spent until the study first reaches its best value, median pruner / no pruner "
    "(evidence, 12 trials x 4 epochs, random sampler seed 0)"
)
TARGET = {"at_most": 0.5}
POSTS = 60


def measure(args) -> None:
    encoder, encoder_name = encoder_path()
    data = sample_data("data-p6", POSTS, args.data_dir)
    load = described(encoder_name, f"{POSTS} generated posts")
    repeated(NAME, lambda: epochs_to_best(encoder, data), args.runs, load, DEFINITION, TARGET)


def epochs_to_best(encoder: str, data_dir: str) -> dict:
    """One run: both studies, and the epochs each spent until it first reached the best value."""
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
