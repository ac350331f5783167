"""P7, search effectiveness at equal compute: TPE with median pruning against random search
without pruning, the budget counted in training epochs, several seeds each; and how close
four parallel workers' simultaneous proposals land with and without TPE's constant liar.

    python -m bench.run --only p7
"""

from __future__ import annotations

import dataclasses
import math
import statistics

import numpy as np
import optuna

from bench.common import repeated
from bench.workload import described, sample_data, tiny_encoder
from hpo.train.config import TrainConfig
from hpo.train.loop import train

NAME = "p7"
DEFINITION = (
    "share of an equal epoch budget TPE + median pruning needs to reach random search's final "
    "median best (5 seeds each)"
)
TARGET = {"at_most": 0.5}
POSTS = 150
SEEDS = 5
EPOCHS_PER_TRIAL = 4
BUDGET_EPOCHS = 48  # 12 full trials
CHECKPOINTS = (0.25, 0.5, 1.0)


def measure(args) -> None:
    """A tiny random-init encoder: the measure needs many trials, not a good model."""
    data = sample_data("data-p7", POSTS, args.data_dir)
    load = described("tiny random-init RoBERTa", f"{POSTS} generated realistic posts")
    repeated(NAME, lambda: tpe_vs_random(tiny_encoder(), data), args.runs, load, DEFINITION, TARGET)


def _space(trial: optuna.Trial) -> dict:
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 3e-2, log=True),
        "head_layers": trial.suggest_int("head_layers", 0, 1),
        "pooling": trial.suggest_categorical("pooling", ["cls", "mean"]),
        "head_dropout": trial.suggest_float("head_dropout", 0.0, 0.3),
        "warmup_ratio": trial.suggest_float("warmup_ratio", 0.0, 0.2),
    }


def _search(
    base: TrainConfig, sampler: optuna.samplers.BaseSampler, pruner: optuna.pruners.BasePruner
) -> list:
    """(epochs spent so far, best value so far) after every trial, until the budget is spent."""
    study = optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)
    spent, curve = 0, []
    while spent < BUDGET_EPOCHS:
        trial = study.ask()
        epochs = min(EPOCHS_PER_TRIAL, BUDGET_EPOCHS - spent)
        ran = []

        def report(epoch: int, value: float, metrics: dict, trial=trial, ran=ran) -> None:
            ran.append(epoch)
            trial.report(value, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned()

        try:
            result = train(dataclasses.replace(base, epochs=epochs, **_space(trial)), report=report)
            study.tell(trial, result.value)
        except optuna.TrialPruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        spent += len(ran)
        best = max((t.value for t in study.trials if t.value is not None), default=float("nan"))
        curve.append((spent, best))
    return curve


def _best_at(curve: list, epochs: float) -> float:
    reached = [best for spent, best in curve if spent <= epochs]
    return reached[-1] if reached else float("nan")


def tpe_vs_random(encoder: str, data_dir: str) -> dict:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    base = TrainConfig(
        task="criteria",
        encoder=encoder,
        data_dir=data_dir,
        criteria_formulation="multilabel",
        max_length=64,
        batch_size=16,
        class_weighting="balanced",
        objective_metric="macro_f1",
        split_fractions=(0.6, 0.3, 0.1),
        mixed_precision="no",
    )
    curves = {"tpe+median": [], "random": []}
    for seed in range(SEEDS):
        curves["tpe+median"].append(
            _search(
                base,
                optuna.samplers.TPESampler(seed=seed, n_startup_trials=4, multivariate=True),
                optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1),
            )
        )
        curves["random"].append(
            _search(base, optuna.samplers.RandomSampler(seed=seed), optuna.pruners.NopPruner())
        )
    medians = {
        name: {
            f"{share:.0%}": statistics.median(_best_at(c, share * BUDGET_EPOCHS) for c in runs)
            for share in CHECKPOINTS
        }
        for name, runs in curves.items()
    }
    target = medians["random"]["100%"]
    needed = next(
        (
            epochs
            for epochs in range(1, BUDGET_EPOCHS + 1)
            if statistics.median(_best_at(c, epochs) for c in curves["tpe+median"]) >= target
        ),
        None,
    )
    return {
        "ratio": needed / BUDGET_EPOCHS if needed else None,
        "median_best": medians,
        "budget_epochs": BUDGET_EPOCHS,
        "seeds": SEEDS,
        "liar": proposal_spread(),
        "workload": f"tiny encoder, {data_dir}, criteria multilabel, max_length 64, up to "
        f"{EPOCHS_PER_TRIAL} epochs a trial",
    }


def proposal_spread(workers: int = 4, rounds: int = 10, seeds: int = SEEDS) -> dict:
    """Mean distance between the proposals that ``workers`` workers hold at once (all asked
    before any is told), in the unit cube of the space; larger is less crowded."""

    def objective(params: dict) -> float:  # smooth, one optimum: where TPE would crowd
        return (
            -((math.log10(params["learning_rate"]) + 3) ** 2) - (params["head_dropout"] - 0.1) ** 2
        )

    spread = {}
    for liar in (False, True):
        distances = []
        for seed in range(seeds):
            sampler = optuna.samplers.TPESampler(
                seed=seed, n_startup_trials=8, multivariate=True, constant_liar=liar
            )
            study = optuna.create_study(direction="maximize", sampler=sampler)
            for round_ in range(rounds):
                trials = [study.ask() for _ in range(workers)]
                points = [
                    (np.log10(t.suggest_float("learning_rate", 1e-5, 3e-2, log=True)) + 5) / 3.48
                    for t in trials
                ]
                drops = [t.suggest_float("head_dropout", 0.0, 0.3) / 0.3 for t in trials]
                if round_ >= 2:  # after the random start-up trials
                    xy = np.column_stack([points, drops])
                    distances += [
                        float(np.linalg.norm(xy[i] - xy[j]))
                        for i in range(workers)
                        for j in range(i + 1, workers)
                    ]
                for t in trials:
                    study.tell(t, objective(t.params))
        spread["constant_liar" if liar else "plain"] = statistics.fmean(distances)
    return spread
