"""Which decision thresholds (and which models) should ``hpo finalize --cv K`` decide with?

Its K fold models train on (K-1)/K of train + validation (300 posts with K=3 at the mid share)
while the seed models it scores test with train on all of train (400): the out-of-fold
probabilities the thresholds are chosen on come from smaller, differently calibrated models
than the ones they are applied to. Here, per repeat (a fresh calibrated realistic sample each),
the standard recipe trains the seed models and the K fold models once, and every rule below
decides the same test posts from the same models (paired):

- ``fixed``: the seeds' ensemble at 0.5;
- ``validation``: the seeds' ensemble at thresholds tuned on validation;
- ``out_of_fold``: the seeds' ensemble at the out-of-fold thresholds (finalize --cv today);
- ``out_of_fold_mapped``: those thresholds carried onto the seeds' scale through the validation
  posts, which both the fold that held them out and the seeds scored unseen (no label read);
- ``folds``: the K fold models' ensemble at the out-of-fold thresholds (their own scale);
- ``seeds_and_folds``: all the models averaged, at the out-of-fold thresholds.

The test split is made larger than the real job's (posts beyond train + validation go to test)
so that a difference between rules on the same models can be seen; train and validation keep
the mid share's 400 / 50.

    python -m bench.threshold_rules --posts 900 --max-length 128 --seeds 2 --repeats 5
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from bench.calibration import recipe_config
from bench.common import RUNS, encoder_path, sample_parser
from bench.results import write_results
from bench.search_budget import RECIPE, mean_interval
from hpo.fixtures import write_sample

NAME = "threshold_rules"
DEFINITION = (
    "test post macro-F1 of one finalize --cv's models (the recipe's seeds on train, its K fold "
    "models on train + validation) decided by each threshold rule, paired by repeat"
)
TRAIN, VALIDATION = 400, 50  # the mid share's train and validation posts
FOLDS = 3
RULES = (
    "fixed",
    "validation",
    "out_of_fold",
    "out_of_fold_mapped",
    "folds",
    "seeds_and_folds",
)
EPSILON = 1e-6  # keeps a probability of 0 or 1 finite on the logit scale


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), EPSILON, 1 - EPSILON)
    return np.log(p / (1 - p))


def mapped_thresholds(
    thresholds: dict[str, float], fold_scores: np.ndarray, seed_scores: np.ndarray
) -> dict[str, float]:
    """Each symptom's out-of-fold threshold carried onto the seeds' scale: on the validation
    posts (rows; both columns scored by models that did not train on them), the seeds' logit
    fitted as a line of the fold models' logit, and the threshold's logit sent through it. A
    symptom whose fold scores do not vary keeps its threshold."""
    from hpo.data import SYMPTOMS

    out = {}
    for column, symptom in enumerate(SYMPTOMS):
        x, y = _logit(fold_scores[:, column]), _logit(seed_scores[:, column])
        if np.ptp(x) == 0:
            out[symptom] = thresholds[symptom]
            continue
        slope, intercept = np.polyfit(x, y, 1)
        t = intercept + slope * _logit(thresholds[symptom])
        out[symptom] = float(1 / (1 + np.exp(-t)))
    return out


def _data_dir(posts: int, clarity: float, repeat: int):
    folder = RUNS / "threshold-rules" / f"{posts}-c{clarity}-r{repeat}"
    if not (folder / "redsm5_posts.csv").exists():
        write_sample(folder, posts=posts, seed=repeat, profile="realistic", clarity=clarity)
    return folder


def _trained(config, folder) -> float:
    """Train ``config`` into ``folder`` unless an earlier run did; its wall seconds (0: kept)."""
    from hpo.train.loop import train

    if (folder / "classifier.json").exists():
        return 0.0
    started = time.perf_counter()
    train(config)
    return round(time.perf_counter() - started, 1)


def one_repeat(args, encoder: str, repeat: int) -> dict:
    """The seed and fold models of one sample, each rule's test post macro-F1 on them."""
    from hpo.data import SYMPTOMS
    from hpo.final.choose import out_of_fold_thresholds
    from hpo.final.holdout import mean_probabilities, split_cells
    from hpo.train.evaluate import metrics_at, score
    from hpo.train.prepare import prepare_data

    data_dir = _data_dir(args.posts, args.clarity, repeat)
    split = (TRAIN / args.posts, VALIDATION / args.posts, 1 - (TRAIN + VALIDATION) / args.posts)
    base = RUNS / "threshold-rules" / f"models-{args.posts}-{args.max_length}-r{repeat}"
    cache = str(RUNS / "threshold-rules-cache")

    def config(seed: int, folder, cv_fold=None):
        return recipe_config(
            encoder,
            str(data_dir),
            args.max_length,
            seed,
            split_fractions=split,
            split_seed=0,
            checkpoint_dir=str(folder),
            cache_dir=cache,
            cv_fold=cv_fold,
        )

    walls = {}
    seed_dirs = [base / f"seed{s}" for s in range(args.seeds)]
    for seed, folder in enumerate(seed_dirs):
        walls[f"seed{seed}"] = _trained(config(seed, folder), folder)
    fold_dirs = [base / f"fold{i}of{FOLDS}" for i in range(FOLDS)]
    heldout, fold_validation = [], {}
    for i, folder in enumerate(fold_dirs):
        # finalize folds its best configuration's first seed
        fold_config = config(0, folder, (FOLDS, i))
        walls[f"fold{i}"] = _trained(fold_config, folder)
        fold_data = prepare_data(fold_config)
        probs = mean_probabilities(fold_config, fold_data, fold_data.validation, [folder])
        heldout.append(split_cells(fold_data.validation, probs))  # scored once, kept twice
        fold_validation |= dict(zip(fold_data.validation.post_ids, probs, strict=True))
    print(f"[threshold_rules repeat {repeat + 1}] trained: {walls}", flush=True)

    seeds_config = config(0, seed_dirs[0])
    data = prepare_data(seeds_config)
    seeds = {
        name: mean_probabilities(seeds_config, data, getattr(data, name), seed_dirs)
        for name in ("validation", "test")
    }
    folds_test = mean_probabilities(seeds_config, data, data.test, fold_dirs)
    oof = out_of_fold_thresholds(heldout)["thresholds"]
    # the validation posts as the fold that held each one out scored it, row for row
    unseen_by_folds = np.stack([fold_validation[post] for post in data.validation.post_ids])
    decisions = {
        "fixed": (seeds["test"], dict.fromkeys(SYMPTOMS, 0.5)),
        "validation": (seeds["test"], score(data.validation, seeds["validation"]).thresholds),
        "out_of_fold": (seeds["test"], oof),
        "out_of_fold_mapped": (
            seeds["test"],
            mapped_thresholds(oof, unseen_by_folds, seeds["validation"]),
        ),
        "folds": (folds_test, oof),
        "seeds_and_folds": (
            (len(seed_dirs) * seeds["test"] + FOLDS * folds_test) / (len(seed_dirs) + FOLDS),
            oof,
        ),
    }
    run = {"repeat": repeat, "test_posts": len(set(data.test.post_ids)), "wall_s": walls}
    for rule, (probs, thresholds) in decisions.items():
        run[rule] = round(metrics_at(data.test, probs, thresholds)["post_macro_f1"], 4)
    run["thresholds"] = {
        rule: {s: round(t, 4) for s, t in decisions[rule][1].items()}
        for rule in ("validation", "out_of_fold", "out_of_fold_mapped")
    }
    print(f"[threshold_rules repeat {repeat + 1}] {[(r, run[r]) for r in RULES]}", flush=True)
    return run


def compare(runs: list[dict]) -> dict:
    """Per rule its median over repeats, and its difference from finalize --cv's rule today
    (``out_of_fold``) and from ``fixed``, paired by repeat, with the interval of the mean
    difference; "better" or "worse" only where that interval excludes zero."""
    out: dict = {}
    for rule in RULES:
        values = [run[rule] for run in runs]
        out[f"{rule}_median"] = round(statistics.median(values), 4)
        for against in ("out_of_fold", "fixed"):
            if rule == against:
                continue
            paired = [run[rule] - run[against] for run in runs]
            low, high = mean_interval(paired)
            out[f"{rule}_minus_{against}"] = {
                "mean": round(statistics.fmean(paired), 4),
                "interval": [low, high],
                "reads": "better" if low > 0 else "worse" if high < 0 else "no difference shown",
            }
    return out


def measure(args) -> None:
    encoder, encoder_name = encoder_path()
    runs = [one_repeat(args, encoder, repeat) for repeat in range(args.repeats)]
    write_results(
        NAME,
        {
            "encoder": encoder_name,
            "data": f"{args.posts} generated realistic posts per repeat (seed = repeat, clarity "
            f"{args.clarity}): {TRAIN} train / {VALIDATION} validation (the mid share's) and "
            f"the other {args.posts - TRAIN - VALIDATION} test, so that rules can be told apart",
            "models": f"the recipe {RECIPE} at max_length {args.max_length}: {args.seeds} seeds "
            f"on train, and seed 0 on each of {FOLDS} folds of train + validation",
        },
        {rule: [{"value": run[rule], **run} for run in runs] for rule in RULES},
        "value",
        definition=DEFINITION,
        details=compare(runs),
        command=f"python -m bench.threshold_rules --posts {args.posts} --max-length "
        f"{args.max_length} --seeds {args.seeds} --repeats {args.repeats} --clarity {args.clarity}",
    )


def main() -> None:
    parser = sample_parser(__doc__, posts=900, seeds=2)
    parser.add_argument("--repeats", type=int, default=5)
    measure(parser.parse_args())


if __name__ == "__main__":
    main()
