"""Does a search earn its compute? (a) the standard recipe, (b) the search + finalize as the last
round shipped them, (c) the search + finalize as this round ships them, each repeat on new seeds.

    python -m bench.run --only search_budget

(a) the issue's standard recipe (lr 1e-4, 4 epochs, batch 16, balanced weighting, head_tail),
    trained once and scored once on test: ``hpo tune`` (its one warm-start trial) + ``hpo
    finalize --top-k 1 --seeds 1``.
(b) ``hpo tune --timeout`` (TPE, the recipe as warm start; Hyperband pruning on the thresholded
    study metric from epoch 1, as the last round's specs did) + ``hpo finalize --top-k 1 --seeds
    2 --ensemble none`` (the better seed kept, as the last round did).
(c) the same search and budget pruned as round 5's supermax specs did, on average precision
    from epoch 2 (``prune_on`` and the safe first rung) + ``--ensemble seeds`` (the two seeds
    averaged). bench pruning_regret later found average precision the wrong signal for a
    metric judged at a fixed threshold; the specs now prune on the metric from epoch 2.
(b) and (c) get the same ``--timeout`` and the same finalize, so the same wall clock within
a few percent (each arm's seconds are recorded); (a) is one recipe, as its users run it.
Figures: validation post macro-F1 of the model each arm ends with (for (c) the ensemble's)
and its test post macro-F1, scored once. The seed spread is (a)'s test spread across repeats.
"""

from __future__ import annotations

import collections
import json
import statistics
import time

import optuna

from bench.common import RUNS, hpo_cmd, timed_run, write_spec
from bench.results import commit

ARMS = ("a_recipe", "b_last_round", "c_this_round")
POSTS, FRACTIONS = 150, (0.6, 0.2, 0.2)  # 90 training, 30 validation, 30 test posts
TUNE_BUDGET = "4m"
STORAGE = f"sqlite:///{RUNS / 'search_budget.db'}"
DONE = RUNS / "search_budget"  # each finished arm's result
RECIPE = {
    "learning_rate": 1.0e-4,
    "epochs": 4,
    "batch_size": 16,
    "class_weighting": "balanced",
    "long_text": "head_tail",
    "warmup_ratio": 0.1,
    "head_dropout": 0.1,
}
SEARCH_SPACE = {  # the real-data study
    "learning_rate": {"type": "float", "low": 2.0e-5, "high": 3.0e-4, "log": True},
    "epochs": {"type": "int", "low": 2, "high": 4},
    "batch_size": {"type": "categorical", "choices": [16, 32]},
    "class_weighting": {"type": "categorical", "choices": ["balanced", "sqrt"]},
    "long_text": {"type": "categorical", "choices": ["truncate", "head_tail"]},
    "warmup_ratio": {"type": "float", "low": 0.0, "high": 0.2},
    "head_dropout": {"type": "float", "low": 0.0, "high": 0.3},
}
TRAIN = {
    "max_length": 128,
    "split_fractions": list(FRACTIONS),
    "criteria_formulation": "multilabel",
    "mixed_precision": "no",
    "threshold": "fixed",
}
WORKLOAD = {
    "shape": f"MiniLM, criteria multilabel, max_length {TRAIN['max_length']}; search "
    f"{sorted(SEARCH_SPACE)}, TPE (multivariate, group, constant liar), the recipe as warm "
    f"start, hpo tune --workers 2 --timeout {TUNE_BUDGET}; finalize --top-k 1 --workers 2",
    "recipe": RECIPE,
}


def spec(arm: str, repeat: int, encoder: str, data_dir: str) -> tuple[str, str]:
    name = f"budget-{arm}-{repeat}"
    pruner = {  # max_resource: the most epochs the space allows
        "b_last_round": {"min_resource": 1, "max_resource": 4, "reduction_factor": 3},
        "c_this_round": {"min_resource": 2, "max_resource": 4, "reduction_factor": 3},
    }
    fields = {
        "task": "criteria",
        "data_dir": data_dir,
        "metric": "post_macro_f1",
        "n_trials": 1 if arm == "a_recipe" else 100,  # (b) and (c): the budget ends them
        "storage": STORAGE,
        "output_dir": str(RUNS / "studies"),
        "keep_top_k": 0,
        "sampler": {
            "name": "tpe",
            "seed": repeat,
            "options": {"multivariate": True, "group": True, "constant_liar": True},
        },
        "pruner": {"name": "hyperband", "options": pruner[arm]}
        if arm in pruner
        else {"name": "none"},
        "train": {
            **TRAIN,
            "encoder": encoder,
            "seed": 100 * repeat,
            "cache_dir": str(RUNS / "cache"),
        },
        "search_space": SEARCH_SPACE,
        "warm_start": [RECIPE],
    }
    if arm == "c_this_round":
        fields["prune_on"] = "average_precision"
    return name, str(write_spec(name, **fields))


def run_arm(arm: str, repeat: int, encoder: str, data_dir: str) -> dict:
    """One arm of one repeat; its result is kept in ``DONE/<study>.json`` so a bench cut
    short goes on from the arms it finished (each records the commit it ran at)."""
    name, path = spec(arm, repeat, encoder, data_dir)
    done = DONE / f"{name}.json"
    if done.exists():
        return json.loads(done.read_text())
    if arm == "a_recipe":
        tune = ["--workers", "1"]
        finalize = ["--top-k", "1", "--seeds", "1"]
    else:
        tune = ["--workers", "2", "--timeout", TUNE_BUDGET]
        ensemble = "seeds" if arm == "c_this_round" else "none"
        finalize = ["--top-k", "1", "--seeds", "2", "--workers", "2", "--ensemble", ensemble]
    tune_s, _ = timed_run(hpo_cmd("tune", path, *tune, "--no-progress"), timeout=3600)
    finalize_s, _ = timed_run(hpo_cmd("finalize", path, *finalize, "--no-progress"), timeout=3600)
    (summary_file,) = (RUNS / "studies").glob(f"{name}-*/final/metrics.json")
    summary = json.loads(summary_file.read_text())
    study = optuna.load_study(study_name=name, storage=STORAGE)
    states = collections.Counter(t.state.name.lower() for t in study.trials)
    result = {
        "tune_s": round(tune_s, 1),
        "finalize_s": round(finalize_s, 1),
        "wall_s": round(tune_s + finalize_s, 1),
        "search": summary["search"],
        "chosen_trial": summary["chosen"]["trial"],
        "chosen_params": summary["chosen"]["params"],
        "seeds_validation": [s["value"] for s in summary["configurations"][0]["seeds"]],
        "validation_post_macro_f1": summary["chosen"]["validation"]["post_macro_f1"],
        "test_post_macro_f1": summary["test"]["metrics"]["post_macro_f1"],
        "test_post_micro_f1": summary["test"]["metrics"].get("post_micro_f1"),
        "trials": dict(states),
        "commit": commit(),
    }
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps(result, indent=2))
    return result


def search_budget(encoder: str, data_dir: str, repeats: int) -> dict[str, list[dict]]:
    """Every arm once per repeat, in an order that rotates between repeats."""
    runs: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    for repeat in range(repeats):
        order = ARMS[repeat % 3 :] + ARMS[: repeat % 3]
        for arm in order:
            started = time.time()
            result = run_arm(arm, repeat, encoder, data_dir)
            runs[arm].append({"repeat": repeat, **result})
            print(
                f"[search_budget repeat {repeat + 1}] {arm}: validation "
                f"{result['validation_post_macro_f1']:.4f}, test {result['test_post_macro_f1']:.4f}"
                f" in {time.time() - started:.0f} s",
                flush=True,
            )
    return runs


def verdict(runs: dict[str, list[dict]]) -> dict:
    """The issue's target: (c)'s median test score beats (a)'s by more than the seed spread
    ((a)'s test range across repeats, each repeat on new seeds)."""
    recipe = [r["test_post_macro_f1"] for r in runs["a_recipe"]]
    new = [r["test_post_macro_f1"] for r in runs["c_this_round"]]
    margin = statistics.median(new) - statistics.median(recipe)
    spread = max(recipe) - min(recipe)
    return {
        "a_recipe_test_median": round(statistics.median(recipe), 4),
        "c_this_round_test_median": round(statistics.median(new), 4),
        "c_minus_a": round(margin, 4),
        "seed_spread": round(spread, 4),
    }
