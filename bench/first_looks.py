"""How many configurations get a first look at a budget of N full trials, per pruner?

    python -m bench.run --only first_looks      # 20 seeds of the simulation

A simulation, no training: two workers take trials from one study with Optuna's own pruner
deciding at every rung and epoch end, as ``hpo tune`` runs them (the objective's rules: every
rung is evaluated, a trial's last report is never obeyed). Each trial trains 2 to 6 epochs
(the supermax space) on a synthetic curve (quality x (1 - e^-epochs) plus noise), and a look
costs one validation pass, 1/24 of an epoch (validation is 1/8 of the posts, forward only).
The budget is N standard-recipe trials (3 epochs) of compute. It measures what pruning costs
and saves; not which configurations it loses (bench/pruning_regret.py replays real curves).
"""

from __future__ import annotations

import math
import random
import statistics

import optuna
from optuna.trial import TrialState

from bench.results import write_results

NAME = "first_looks"
DEFINITION = (
    "configurations that get a first look per full recipe trial's compute, two workers under "
    "each pruner on synthetic curves, at budgets of 2, 4 and 8 full trials"
)
DEFAULTS = {"runs": 20}  # a run is one seed of the simulation: seconds each
BUDGETS = (2, 4, 8)  # full recipe trials of compute
LOOK_COST = 1 / 24  # one validation pass, in epochs of training
RECIPE_EPOCHS, EPOCHS, WORKERS = 3, (2, 6), 2
VARIANTS = {  # pruner, units_per_epoch, its options
    "none": ("none", 1, {}),
    "hyperband_epoch_2": ("hyperband", 1, {"min_resource": 2, "max_resource": 6}),  # shipped
    "hyperband_ninth": ("hyperband", 9, {"min_resource": 1, "max_resource": 54}),
    "successive_halving_third": ("successive_halving", 9, {"min_resource": 3}),
    "successive_halving_ninth": ("successive_halving", 9, {"min_resource": 1}),
}
PRUNERS = {
    "none": optuna.pruners.NopPruner,
    "hyperband": optuna.pruners.HyperbandPruner,
    "successive_halving": optuna.pruners.SuccessiveHalvingPruner,
}


def first_looks(variant: str, budgets: int, seed: int) -> int:
    """Configurations that reached their first evaluation within ``budgets`` recipe trials."""
    name, units, options = VARIANTS[variant]
    rng = random.Random(seed)
    study = optuna.create_study(
        direction="maximize", pruner=PRUNERS[name](**options), study_name=f"looks-{seed}"
    )
    first = options.get("min_resource", units)
    rungs = [first * 3**k for k in range(8) if first * 3**k <= EPOCHS[1] * units]
    per_worker = budgets * RECIPE_EPOCHS / WORKERS  # epochs of training each worker can afford

    def start(now: float) -> dict:
        trial = study.ask()
        epochs = RECIPE_EPOCHS if trial.number == 0 else rng.randint(*EPOCHS)  # the warm start
        steps = sorted(
            {*(r for r in rungs if r < epochs * units), *range(units, epochs * units + 1, units)}
        )
        return {
            "trial": trial,
            "steps": steps,
            "end": epochs * units,
            "at": 0,
            "now": now,
            "quality": rng.random(),
        }

    workers, looked = [start(0.0) for _ in range(WORKERS)], 0
    while True:
        when, index = min(
            (w["now"] + (w["steps"][0] - w["at"]) / units + LOOK_COST, i)
            for i, w in enumerate(workers)
        )
        if when > per_worker:
            return looked
        worker = workers[index]
        step = worker["steps"].pop(0)
        looked += worker["at"] == 0
        worker["now"], worker["at"] = when, step
        value = worker["quality"] * (1 - math.exp(-step / units)) + rng.gauss(0, 0.02)
        worker["trial"].report(value, step)
        if worker["trial"].should_prune() and step < worker["end"]:
            study.tell(worker["trial"], state=TrialState.PRUNED)
        elif worker["steps"]:
            continue
        else:
            study.tell(worker["trial"], value)
        workers[index] = start(when)


def figure(budgets: int) -> str:
    return f"first_looks_per_trial_budget_{budgets}"


def measure(args) -> None:
    """``args.runs`` seeds of every variant; the figures' medians over seeds, and their means
    (docs/specs.md's table) as details."""
    runs = {
        variant: [
            {"seed": seed, **{figure(n): first_looks(variant, n, seed) / n for n in BUDGETS}}
            for seed in range(args.runs)
        ]
        for variant in VARIANTS
    }
    means = {
        variant: {n: round(statistics.fmean(run[figure(n)] for run in found), 2) for n in BUDGETS}
        for variant, found in runs.items()
    }
    write_results(
        NAME,
        {
            "simulation": "no training: Optuna's own pruner decides at every rung and epoch "
            "end; each trial trains 2 to 6 epochs on a synthetic curve (quality x (1 - "
            "e^-epochs) plus noise); a look costs one validation pass",
            "workers": WORKERS,
            "look_cost_epochs": round(LOOK_COST, 4),
            "recipe_epochs": RECIPE_EPOCHS,
            "variants": VARIANTS,
        },
        runs,
        figure(BUDGETS[1]),
        definition=DEFINITION,
        also=(figure(BUDGETS[0]), figure(BUDGETS[2])),
        details={"mean_over_seeds": means},
        command=f"python -m bench.run --only {NAME}"
        + (f" --runs {args.runs}" if args.runs != DEFAULTS["runs"] else ""),
    )
