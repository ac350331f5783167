"""How often does the pruner kill the configuration that would have ended best?

    python -m bench.run --only pruning_regret

Every configuration is trained to its last epoch once, without pruning, recording each epoch's
validation metrics (the study metric and the threshold-free average precision). Optuna's own
HyperbandPruner then replays those curves in many random orders (a trial's bracket and its
rivals change with the order) for each variant: the last round's (the thresholded study metric,
from epoch 1), this round's default first rung (the same metric, from epoch 2), and a
threshold-free signal (``prune_on: average_precision`` or ``auroc``) from epoch 2. Per order:
whether the configuration with the best final value was pruned, the regret (best final value
minus the best among the trials not pruned) and the share of epochs trained.

Replayed one trial at a time: a study with N workers sees fewer rivals when it decides, so
this is the pruner's decision rule on these curves, not a timing.
"""

from __future__ import annotations

import random
import statistics
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import optuna

from bench.common import RUNS, write_spec
from bench.results import commit
from bench.search_budget import FRACTIONS, RECIPE, SEARCH_SPACE, TRAIN

EPOCHS, CONFIGS, ORDERS, RUNS_OF_ORDERS = 4, 10, 100, 5  # 5 runs of 100 random orders
VARIANTS = {  # what the pruner judges an epoch by, and its first rung
    "last_round": {"signal": "post_macro_f1", "min_resource": 1},
    "first_rung_2": {"signal": "post_macro_f1", "min_resource": 2},  # this round's default
    "average_precision_rung_2": {"signal": "average_precision", "min_resource": 2},
    "auroc_rung_2": {"signal": "auroc", "min_resource": 2},
}


def curves(encoder: str, data_dir: str, workers: int = 2) -> list[dict]:
    """The recipe and CONFIGS random configurations of the search space (epochs fixed, so
    every curve reaches the same last epoch), each trained to the end, ``workers`` at a time
    with one thread each, as ``hpo tune --workers 2`` runs them."""
    from hpo.spec import load_spec
    from hpo.study import sample_points

    space = {k: v for k, v in SEARCH_SPACE.items() if k != "epochs"}
    path = write_spec(
        "pruning-regret",
        task="criteria",
        data_dir=data_dir,
        metric="post_macro_f1",
        n_trials=CONFIGS,
        sampler={"name": "random", "seed": 0},
        train={**TRAIN, "encoder": encoder, "epochs": EPOCHS, "cache_dir": str(RUNS / "cache")},
        search_space=space,
    )
    spec = load_spec(str(path))
    recipe = {k: v for k, v in RECIPE.items() if k in space}
    points = [recipe, *sample_points(spec, CONFIGS)]
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        histories = list(pool.map(_train_one, [str(path)] * len(points), points))
    return [{"params": p, "epochs": h} for p, h in zip(points, histories, strict=True)]


def _train_one(spec_path: str, params: dict) -> list[dict]:
    import torch

    from hpo.spec import load_spec
    from hpo.train.loop import train

    torch.set_num_threads(1)
    spec = load_spec(spec_path)
    history: list[dict] = []

    def report(epoch: int, value: float, metrics: dict) -> bool:
        kept = ("post_macro_f1", "average_precision", "auroc")
        history.append({"epoch": epoch, "value": value, **{k: metrics[k] for k in kept}})
        return False

    train(spec.train_config(params, checkpoint_dir=None), report=report)
    return history


def replay(configs: list[dict], variant: dict, orders: int = ORDERS, seed: int = 0) -> dict:
    """The pruner's decisions on the recorded curves, over ``orders`` random orders."""
    final = [max(e["value"] for e in c["epochs"]) for c in configs]  # a trial keeps its best
    best = max(range(len(configs)), key=final.__getitem__)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruned_best, regrets, epochs = 0, [], 0
    shuffle = random.Random(seed)
    for order_no in range(orders):
        order = list(range(len(configs)))
        shuffle.shuffle(order)
        study = optuna.create_study(
            study_name=f"replay-{seed}-{order_no}",
            direction="maximize",
            pruner=optuna.pruners.HyperbandPruner(
                min_resource=variant["min_resource"], max_resource=EPOCHS, reduction_factor=3
            ),
        )
        kept: dict[int, float] = {}
        for index in order:
            trial = study.ask()
            for record in configs[index]["epochs"]:
                epochs += 1
                trial.report(record[variant["signal"]], step=record["epoch"])
                if trial.should_prune():
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    break
            else:
                study.tell(trial, final[index])
                kept[index] = final[index]
        regret = final[best] - max(kept.values())  # Hyperband finishes some in every order
        pruned_best += regret > 1e-12  # every configuration ending best was pruned (ties too)
        regrets.append(regret)
    return {
        "best_pruned_share": pruned_best / orders,
        "mean_regret": statistics.fmean(regrets),
        "median_regret": statistics.median(regrets),
        "epochs_share": epochs / (orders * sum(len(c["epochs"]) for c in configs)),
    }


def pruning_regret(encoder: str, data_dir: str, recorded: dict | None = None) -> tuple[dict, dict]:
    """Per variant one summary of its replays; the curves themselves as details.
    ``recorded``: an earlier results file's details, to replay its curves again."""
    if recorded is None:
        recorded = {"curves": curves(encoder, data_dir), "curves_commit": commit()}
    runs = {
        name: [replay(recorded["curves"], variant, seed=run) for run in range(RUNS_OF_ORDERS)]
        for name, variant in VARIANTS.items()
    }
    details = {
        "configurations": len(recorded["curves"]),
        "orders_per_run": ORDERS,
        "split_fractions": list(FRACTIONS),
        "curves_commit": recorded.get("curves_commit"),
        "curves": recorded["curves"],
    }
    return runs, details
