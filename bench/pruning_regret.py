"""How often does the pruner kill the configuration that would have ended best?

    python -m bench.run --only pruning_regret                # the real job's size (~1 hour here)
    python -m bench.run --only pruning_regret --share quick  # 150 posts (~15 minutes)
    python -m bench.run --only pruning_regret --data-dir ../shared/redsm5  # the real posts

The full share trains on the calibrated realistic sample at the real set's size and split
(1,484 posts: 149 validation posts decide, as on the real job) at 128 of the real 256 tokens, so
that eleven 4-epoch curves fit an hour of a 2-core machine (``pruning_regret_full.json``); the
quick share on 150 posts (30 validation posts, ``pruning_regret.json``). With ``--data-dir`` on
the real ReDSM5 the same curves train on the real posts (``pruning_regret_real.json``).

Every configuration is trained to its last epoch once, without pruning, recording each epoch's
validation metrics (the study metric and the threshold-free average precision). Optuna's own
HyperbandPruner then replays those curves in many random orders (a trial's bracket and its
rivals change with the order) for each variant: the last round's (the thresholded study metric,
from epoch 1), this round's default first rung (the same metric, from epoch 2), and a
threshold-free signal (``prune_on: average_precision`` or ``auroc``) from epoch 2. Per order:
whether the configuration with the best final value was pruned, the regret (best final value
minus the best among the trials not pruned), the share of epochs trained and its inverse, the
configurations judged for one full trial's training.

Curves recorded with looks inside an epoch (``UNITS`` per epoch, at ``LOOKS``, as
``pruner.units_per_epoch`` records them) also replay the sub-epoch variants through
SuccessiveHalvingPruner at the same steps, with the same regret definition; older curves hold
epoch ends only, and those variants are left out of their replay. As the objective does, a
trial's last report is never obeyed.

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
from bench.results import commit, data_identity, load_all, write_results
from bench.workload import (
    RECIPE,
    SEARCH_SPACE,
    SHARES,
    STUDY_TRAIN,
    data_words,
    described,
    encoder_path,
    sample_data,
)

NAME = "pruning_regret"
# per share its results file; posts and split are the workload's share of the same name, the
# token budget STUDY_TRAIN's 128 in each
RESULTS = {share: NAME if share == "quick" else f"{NAME}_{share}" for share in SHARES}
REAL_RESULTS = f"{NAME}_real"  # the full share's curves trained on the real ReDSM5
DEFINITION = (
    "share of replay orders in which the pruner killed the configuration that ends best; "
    "regret: its final post macro-F1 minus the best kept"
)

EPOCHS, CONFIGS, ORDERS, RUNS_OF_ORDERS = 4, 10, 100, 5  # 5 runs of 100 random orders
UNITS, LOOKS = 9, (1, 3)  # sub-epoch curves: steps of 1/9 epoch, looks at 1/9 and 1/3 epoch
VARIANTS = {  # what the pruner judges by, its first rung, and its unit (steps per epoch)
    "last_round": {"signal": "post_macro_f1", "min_resource": 1},
    "first_rung_2": {"signal": "post_macro_f1", "min_resource": 2},  # the epoch-2 default
    "average_precision_rung_2": {"signal": "average_precision", "min_resource": 2},
    "auroc_rung_2": {"signal": "auroc", "min_resource": 2},
    # successive halving on ninths of an epoch: the supermax specs' rungs, and a gentler start
    "ninth_epoch": {"signal": "post_macro_f1", "min_resource": 1, "units": UNITS},
    "third_epoch": {"signal": "post_macro_f1", "min_resource": 3, "units": UNITS},
    # successive halving from the end of epoch 1: the latest first rung that can still buy the
    # issue's 4 configurations per full trial's cost (a 4-epoch trial pruned there pays 1/4)
    "first_epoch": {"signal": "post_macro_f1", "min_resource": UNITS, "units": UNITS},
    # the same rungs judged by how well scores rank: F1 at a fixed 0.5 is near its floor
    # for every configuration a ninth of an epoch in, so it may not rank them at all
    "ninth_epoch_average_precision": {
        "signal": "average_precision",
        "min_resource": 1,
        "units": UNITS,
    },
    "third_epoch_average_precision": {
        "signal": "average_precision",
        "min_resource": 3,
        "units": UNITS,
    },
}


def measure(args) -> None:
    """Trains the curves at ``args.share``'s size, or with ``args.resume`` replays that share's
    committed results file's curves again."""
    encoder, encoder_name = encoder_path()
    share = SHARES[args.share]
    posts, fractions = share.posts, share.fractions
    # the calibrated realistic sample (hpo.fixtures.realistic.CLARITY), or the real files
    data = sample_data(f"data-{posts}", posts, args.data_dir)
    real = data_identity(data)["data_kind"] == "real ReDSM5"
    results = REAL_RESULTS if real else RESULTS[args.share]
    earlier = load_all().get(results) if args.resume else None
    if earlier:  # its curves, and the commit that trained them
        earlier = {"curves_commit": earlier["commit"], **earlier["details"]}
    runs, details = pruning_regret(encoder, data, fractions, earlier)
    write_results(
        results,
        described(
            encoder_name,
            data_words(args.data_dir, posts, fractions),
            shape=f"the recipe + {CONFIGS} random configurations of the real-data study's "
            f"space (bench/workload.py), {EPOCHS} epochs each at max_length "
            f"{STUDY_TRAIN['max_length']}, replayed through HyperbandPruner (max_resource "
            f"{EPOCHS}, reduction_factor 3) or, for looks inside an epoch, "
            f"SuccessiveHalvingPruner (reduction_factor 3); each run: "
            f"{ORDERS} random orders",
        ),
        runs,
        "best_pruned_share",
        None,
        definition=DEFINITION,
        also=("mean_regret", "epochs_share", "configurations_per_full_trial"),
        details=details,
        command=f"python -m bench.run --only {NAME}"
        + (f" --share {args.share}" if args.share != "full" else "")
        + (f" --data-dir {args.data_dir}" if args.data_dir else "")
        + (" --resume" if earlier else ""),
        data_dir=data,
    )


def curves(encoder: str, data_dir: str, fractions, workers: int = 2) -> list[dict]:
    """The recipe and CONFIGS random configurations of the search space (epochs fixed, so
    every curve reaches the same last epoch), each trained to the end, ``workers`` at a time
    with one thread each, as ``hpo tune --workers 2`` runs them."""
    from hpo.spec import load_spec
    from hpo.study.search import sample_points

    space = {k: v for k, v in SEARCH_SPACE.items() if k != "epochs"}
    path = write_spec(
        "pruning-regret",
        task="criteria",
        data_dir=data_dir,
        metric="post_macro_f1",
        n_trials=CONFIGS,
        sampler={"name": "random", "seed": 0},
        train={
            **STUDY_TRAIN,
            "split_fractions": list(fractions),
            "encoder": encoder,
            "epochs": EPOCHS,
            "cache_dir": str(RUNS / "cache"),
        },
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
    from hpo.train.loop import Looks, train

    torch.set_num_threads(1)
    spec = load_spec(spec_path)
    history: list[dict] = []

    def report(step: int, value: float, metrics: dict) -> bool:
        kept = ("post_macro_f1", "average_precision", "auroc")
        record = {"step": step, "value": value, **{k: metrics[k] for k in kept}}
        if step % UNITS == 0:
            record["epoch"] = step // UNITS
        history.append(record)
        return False

    train(spec.train_config(params, checkpoint_dir=None), report=report, looks=Looks(UNITS, LOOKS))
    return history


def _reports(curve: list[dict], units: int) -> list[tuple[int, dict]]:
    """(step, record) in the variant's unit: epoch ends alone for whole epochs."""
    if units == 1:
        return [(record["epoch"], record) for record in curve if "epoch" in record]
    return [(record["step"], record) for record in curve if "step" in record]


def replay(configs: list[dict], variant: dict, orders: int = ORDERS, seed: int = 0) -> dict:
    """The pruner's decisions on the recorded curves, over ``orders`` random orders."""
    units = variant.get("units", 1)
    # a trial keeps its best epoch
    final = [max(e["value"] for e in c["epochs"] if "epoch" in e) for c in configs]
    best = max(range(len(configs)), key=final.__getitem__)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruned_best, regrets, trained = 0, [], 0
    shuffle = random.Random(seed)
    for order_no in range(orders):
        order = list(range(len(configs)))
        shuffle.shuffle(order)
        pruner = (
            optuna.pruners.SuccessiveHalvingPruner(
                min_resource=variant["min_resource"], reduction_factor=3
            )
            if units > 1
            else optuna.pruners.HyperbandPruner(
                min_resource=variant["min_resource"], max_resource=EPOCHS, reduction_factor=3
            )
        )
        study = optuna.create_study(
            study_name=f"replay-{seed}-{order_no}", direction="maximize", pruner=pruner
        )
        kept: dict[int, float] = {}
        for index in order:
            trial = study.ask()
            reports = _reports(configs[index]["epochs"], units)
            for step, record in reports:
                trial.report(record[variant["signal"]], step=step)
                # as the objective: asked at the last report too, never obeyed there
                if trial.should_prune() and step < reports[-1][0]:
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    trained += step / units
                    break
            else:
                study.tell(trial, final[index])
                kept[index] = final[index]
                trained += reports[-1][0] / units
        regret = final[best] - max(kept.values())  # the first trial always finishes
        pruned_best += regret > 1e-12  # every configuration ending best was pruned (ties too)
        regrets.append(regret)
    return {
        "best_pruned_share": pruned_best / orders,
        "mean_regret": statistics.fmean(regrets),
        "median_regret": statistics.median(regrets),
        # training done, in epochs, over what every configuration trained in full would cost
        "epochs_share": trained / (orders * len(configs) * EPOCHS),
        # configurations judged for one full trial's training (1 / epochs_share): the issue's
        # "4N configurations at a budget of N full trials", before per-trial overheads
        "configurations_per_full_trial": orders * len(configs) * EPOCHS / trained,
    }


def pruning_regret(
    encoder: str, data_dir: str, fractions, recorded: dict | None = None
) -> tuple[dict, dict]:
    """Per variant one summary of its replays; the curves themselves as details.
    ``recorded``: an earlier results file's details, to replay its curves again."""
    if recorded is None:
        recorded = {"curves": curves(encoder, data_dir, fractions), "curves_commit": commit()}
    sub_epoch = all("step" in e for c in recorded["curves"] for e in c["epochs"])
    runs = {
        name: [replay(recorded["curves"], variant, seed=run) for run in range(RUNS_OF_ORDERS)]
        for name, variant in VARIANTS.items()
        if sub_epoch or variant.get("units", 1) == 1  # older curves: epoch ends only
    }
    details = {
        "configurations": len(recorded["curves"]),
        "orders_per_run": ORDERS,
        "split_fractions": list(recorded.get("split_fractions", fractions)),
        "curves_commit": recorded.get("curves_commit"),
        "curves": recorded["curves"],
    }
    return runs, details
