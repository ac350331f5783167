"""Should the real job finalize with ``--cv``? ``hpo finalize --seeds 2`` decides at the fixed
0.5 (the user's real job); ``--cv K`` trains K fold models of the chosen configuration on
train + validation and decides the seeds' ensemble at the thresholds chosen on their pooled
out-of-fold probabilities (K times the posts that validation-tuned thresholds see). Here the
recipe trains the seeds on train and finalize's K fold models (seed 0) on one split, and every
rule decides the same test posts from the same models:

- ``fixed``: the seeds' ensemble at 0.5 (finalize without --cv);
- ``validation``: the seeds' ensemble at thresholds tuned on validation;
- ``out_of_fold``: the seeds' ensemble at the out-of-fold thresholds (finalize --cv K);
- ``folds``: the K fold models' ensemble at the out-of-fold thresholds;
- ``seeds_and_folds``: every model averaged, at the out-of-fold thresholds.

Each rule's gain over ``fixed`` is paired: the same test posts resampled for both sides.

    python -m bench.run --only fold_thresholds --data-dir ../shared/redsm5
"""

from __future__ import annotations

import numpy as np

from bench.common import RUNS
from bench.portfolio_moves import LEVEL, RESAMPLES, paired_gain
from bench.results import write_results
from bench.trainings import config_of, settings, train_all, wall_seconds
from bench.workload import RECIPE, SPLIT, data_words, encoder_path, measured_data

NAME = "fold_thresholds"
DEFINITION = (
    "test post macro-F1 of finalize's models (the recipe's seeds on train, its K fold models on "
    "train + validation) decided by each threshold rule, the same test posts for every rule"
)
FOLDS = 3  # finalize --cv 3: the fold models train on 2/3 of train + validation
RULES = ("fixed", "validation", "out_of_fold", "folds", "seeds_and_folds")
DEFAULTS = {"runs": 1, "seeds": 2, "max_length": 256}  # a run: one split's 2 + 3 trainings


def _jobs(encoder, data_dir, max_length: int, tag: str, split_seed: int, seeds: int):
    """The seed models, then the fold models, of one split."""
    base = RUNS / "fold-thresholds"
    cache = RUNS / "fold-thresholds-cache"

    def job(seed: int, name: str, point: dict) -> dict:
        folder = base / f"{tag}-split{split_seed}-{name}"
        return settings(
            encoder, data_dir, max_length, seed, point, folder, cache, split_seed=split_seed
        )

    seed_jobs = [job(seed, f"s{seed}", {}) for seed in range(seeds)]
    # finalize folds its configuration's first seed
    fold_jobs = [job(0, f"fold{i}of{FOLDS}", {"cv_fold": (FOLDS, i)}) for i in range(FOLDS)]
    return seed_jobs, fold_jobs


def one_split(seed_jobs: list[dict], fold_jobs: list[dict]) -> tuple[dict, dict]:
    """Every rule's decisions on the split's test posts: (the run's record, per rule the 0/1
    post x symptom decisions, with the truth under "truth")."""
    from hpo.data import SYMPTOMS
    from hpo.final.choose import out_of_fold_thresholds
    from hpo.final.holdout import mean_probabilities, split_cells
    from hpo.train.evaluate import metrics_at, post_intervals, post_matrix, score
    from hpo.train.prepare import prepare_data

    heldout = []
    for job in fold_jobs:
        fold_config = config_of(job)
        fold_data = prepare_data(fold_config)  # its validation: the posts its fold held out
        probs = mean_probabilities(fold_config, fold_data, fold_data.validation, [job["folder"]])
        heldout.append(split_cells(fold_data.validation, probs))
    oof = out_of_fold_thresholds(heldout).thresholds

    config = config_of(seed_jobs[0])
    data = prepare_data(config)
    seed_dirs = [job["folder"] for job in seed_jobs]
    fold_dirs = [job["folder"] for job in fold_jobs]
    seeds = {
        name: mean_probabilities(config, data, getattr(data, name), seed_dirs)
        for name in ("validation", "test")
    }
    folds_test = mean_probabilities(config, data, data.test, fold_dirs)
    every = (len(seed_dirs) * seeds["test"] + len(fold_dirs) * folds_test) / (
        len(seed_dirs) + len(fold_dirs)
    )
    decisions = {
        "fixed": (seeds["test"], dict.fromkeys(SYMPTOMS, 0.5)),
        "validation": (seeds["test"], score(data.validation, seeds["validation"]).thresholds),
        "out_of_fold": (seeds["test"], oof),
        "folds": (folds_test, oof),
        "seeds_and_folds": (every, oof),
    }
    run: dict = {
        "split_seed": config.split_seed,
        "test_posts": len(set(data.test.post_ids)),
        "wall_s": {f"seed{j['seed']}": wall_seconds(j) for j in seed_jobs}
        | {f"fold{i}": wall_seconds(j) for i, j in enumerate(fold_jobs)},
    }
    truth, _ = post_matrix(data.test, seeds["test"])
    decided = {"truth": truth.astype(np.int64)}
    for rule, (probs, thresholds) in decisions.items():
        _, scores = post_matrix(data.test, probs)
        cut = np.array([thresholds[s] for s in SYMPTOMS])
        decided[rule] = (scores >= cut).astype(np.int64)
        interval = post_intervals(data.test, probs, thresholds)["post_macro_f1"]
        run[rule] = round(metrics_at(data.test, probs, thresholds)["post_macro_f1"], 4)
        run[f"{rule}_interval"] = [round(interval["low"], 4), round(interval["high"], 4)]
        run[f"{rule}_called_cells"] = int(decided[rule].sum())
    run["true_cells"] = int(decided["truth"].sum())
    run["thresholds"] = {
        rule: {s: round(t, 4) for s, t in decisions[rule][1].items()}
        for rule in ("validation", "out_of_fold")
    }
    return run, decided


def measure(args) -> None:
    encoder, encoder_name = encoder_path()
    data_dir, real, tag = measured_data("fold-thresholds", args)
    splits = [
        _jobs(encoder, data_dir, args.max_length, tag, split_seed, args.seeds)
        for split_seed in range(args.runs)
    ]
    # one queue in split order: a run cut short still has the first splits whole
    train_all(
        [job for jobs in splits for job in [*jobs[0], *jobs[1]]], args.parallel, args.threads, NAME
    )
    runs, gains = [], {}
    for seed_jobs, fold_jobs in splits:
        run, decided = one_split(seed_jobs, fold_jobs)
        runs.append(run)
        gains[f"split {run['split_seed']}"] = {
            rule: paired_gain(decided["truth"], [decided[rule]], [decided["fixed"]])
            for rule in RULES
            if rule != "fixed"
        }
        print(f"[{NAME}] split {run['split_seed']}: {[(r, run[r]) for r in RULES]}", flush=True)
    write_results(
        f"{NAME}_real" if real else NAME,
        {
            "encoder": encoder_name,
            "data": data_words(args.data_dir, args.posts, SPLIT)
            + ("" if real else f", clarity {args.clarity}")
            + ", split seeds 0 to "
            + str(args.runs - 1),
            "models": f"the recipe {RECIPE} at max_length {args.max_length}: {args.seeds} "
            f"seeds on train, and seed 0 on each of {FOLDS} folds of train + validation "
            f"(finalize --seeds {args.seeds} --cv {FOLDS})",
            "parallel": f"{args.parallel} trainings at a time, {args.threads} thread(s) each",
        },
        {rule: [{"value": run[rule], **run} for run in runs] for rule in RULES},
        "value",
        definition=DEFINITION,
        details={
            "paired_gain_over_fixed": gains,
            "resamples": RESAMPLES,
            "level": LEVEL,
        },
        fewer_runs=None
        if args.runs >= 5
        else {
            "at_least": args.runs,
            "why": f"{args.runs} split(s): each is {args.seeds + FOLDS} trainings of the recipe "
            "on a 2-core CPU; the uncertainty that decides a rule is the paired interval over "
            "test posts (details), not the spread over splits",
        },
        command=f"python -m bench.run --only {NAME} --runs {args.runs} --seeds {args.seeds} "
        f"--max-length {args.max_length} --parallel {args.parallel} --threads {args.threads}"
        + (f" --data-dir {args.data_dir}" if real else f" --posts {args.posts}"),
        data_dir=data_dir,
    )
