"""How far do the words alone go? Two bag-of-words baselines, on the real ReDSM5 or on the
realistic sample, with the product's split and loader: a sample a bag of words reads more easily
than the real posts rewards templates, not reading (issue #56).

    python -m bench.run --only lexical_baselines                    # the sample, real size
    python -m bench.run --only lexical_baselines --data-dir ../shared/redsm5   # the real posts

post-level: TF-IDF (1-2 grams) of the whole post and one logistic regression per symptom
(balanced class weights), trained on the training posts. sentence-max: the same per sentence
(the post split as the evidence task splits it), trained on the training posts' sentences
labelled by their status-1 evidence, a post scoring a symptom by its best sentence. Both at
0.5, on split_seed 0's validation and test splits, post macro-F1 with the product's 95%
bootstrap interval over posts. On the sample each run is one sample seed; the real data is one
run (the fits are deterministic: a second run repeats the first to the last digit).
"""

from __future__ import annotations

import time

import numpy as np

from bench.common import RUNS
from bench.results import data_identity, write_results
from bench.workload import SPLIT, encoder_path

NAME = "lexical_baselines"
REAL_NAME = f"{NAME}_real"
DEFINITION = (
    "test post macro-F1 at 0.5 of TF-IDF (1-2 grams) + balanced logistic regression per "
    "symptom, on whole posts (post-level) and on sentences max-pooled over the post "
    "(sentence-max), split_seed 0; on the sample, target: within 0.05 of the real figures"
)
BASELINES = ("post-level", "sentence-max")
# The real ReDSM5's test figures (lexical_baselines_real.json): the sample is as hard as the
# real posts for a bag of words when both land within TOLERANCE of them.
REAL_TEST = {"post-level": 0.3816, "sentence-max": 0.5021}
TOLERANCE = 0.05
DEFAULTS = {"runs": 5}  # sample seeds; each run ~30 s, most of it splitting sentences


def _vectorizer():
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)


def _fit_predict(train_x, train_y: np.ndarray, others: list) -> list[np.ndarray]:
    """One balanced logistic regression per column of ``train_y``; each of ``others``' scores
    (a column without both classes in training scores its own training share)."""
    from sklearn.linear_model import LogisticRegression

    found = [np.zeros((x.shape[0], train_y.shape[1])) for x in others]
    for column in range(train_y.shape[1]):
        y = train_y[:, column]
        if y.min() == y.max():
            for scores in found:
                scores[:, column] = y.mean()
            continue
        model = LogisticRegression(class_weight="balanced", max_iter=2000).fit(train_x, y)
        for scores, x in zip(found, others, strict=True):
            scores[:, column] = model.predict_proba(x)[:, 1]
    return found


def _post_level(parts: dict) -> dict[str, np.ndarray]:
    vectorizer = _vectorizer()
    train = vectorizer.fit_transform([e.text_b for e in parts["train"]])
    names = ("validation", "test")
    scored = _fit_predict(
        train,
        np.array([e.label for e in parts["train"]]),
        [vectorizer.transform([e.text_b for e in parts[name]]) for name in names],
    )
    return dict(zip(names, scored, strict=True))


def _sentence_max(parts: dict) -> dict[str, np.ndarray]:
    vectorizer = _vectorizer()
    train = parts["train"]
    x = vectorizer.fit_transform([s for e in train for s in e.sentences])
    y = np.array([row for e in train for row in e.evidence])
    names = ("validation", "test")
    sentences = [vectorizer.transform([s for e in parts[n] for s in e.sentences]) for n in names]
    found = {}
    for name, scores in zip(names, _fit_predict(x, y, sentences), strict=True):
        ends = np.cumsum([len(e.sentences) for e in parts[name]])
        found[name] = np.maximum.reduceat(scores, ends - [len(e.sentences) for e in parts[name]])
    return found


def baselines(data_dir: str) -> dict[str, dict]:
    """Both baselines on ``data_dir``: per baseline, validation and test post macro-F1 at 0.5
    with their 95% bootstrap intervals; and facts about the data that explain them."""
    from hpo.data import load_descriptions, load_redsm5, split_posts, symptom_profiles
    from hpo.train.evaluate import RESAMPLES, SEED
    from hpo.train.formulations import build_examples
    from hpo.train.metrics import bootstrap_interval, criteria_metrics

    corpus = load_redsm5(data_dir)
    split = split_posts(symptom_profiles(corpus), SPLIT, seed=0)
    examples = build_examples(corpus, "criteria", load_descriptions(), "whole_post")
    by_post = {e.post_id: e for e in examples}
    parts = {name: [by_post[p] for p in getattr(split, name)] for name in ("train", *_NAMES)}
    found = {}
    for baseline, run in (("post-level", _post_level), ("sentence-max", _sentence_max)):
        started = time.perf_counter()
        scores = run(parts)
        figures = {"seconds": 0.0}
        for name in _NAMES:
            truth = np.array([e.label for e in parts[name]])
            figures[f"{name}_post_macro_f1"] = round(
                criteria_metrics(truth, scores[name], 0.5)["post_macro_f1"], 4
            )
            low, high = bootstrap_interval(truth, scores[name] >= 0.5, n=RESAMPLES, seed=SEED)
            figures[f"{name}_interval"] = [round(low, 4), round(high, 4)]
        figures["seconds"] = round(time.perf_counter() - started, 1)
        found[baseline] = figures
    return found | {"facts": _facts(corpus, parts)}


_NAMES = ("validation", "test")


def _facts(corpus, parts: dict) -> dict:
    """What makes words easy: the share of test evidence sentences found verbatim among the
    training evidence, and the status-0 rows (a symptom touched, not shown)."""
    train = set(_evidence(parts["train"]))
    test = _evidence(parts["test"])
    return {
        "test_evidence_verbatim_in_train": round(sum(s in train for s in test) / len(test), 4)
        if test
        else None,
        "status_0_rows": sum(a.status == 0 for a in corpus.annotations),
        "posts": len(corpus.posts),
    }


def _evidence(examples: list) -> list[str]:
    return [
        sentence
        for e in examples
        for sentence, row in zip(e.sentences, e.evidence, strict=True)
        if any(row)
    ]


def one_run(data_dir: str, seed: int | None, encoder: str, max_length: int) -> dict:
    """Both baselines and the window facts of one data folder, as a run per baseline."""
    from bench.post_windows import window_facts
    from hpo.data import files_fingerprint

    found = baselines(data_dir)
    facts = found.pop("facts")
    window = window_facts(data_dir, encoder, max_length)
    del window["outside"]
    shared = {
        "data_seed": seed,
        "data_fingerprint": files_fingerprint(data_dir),
        **facts,
        **window,
    }
    return {baseline: {**figures, **shared} for baseline, figures in found.items()}


def measure(args) -> None:
    """``args.runs`` sample seeds at ``args.posts`` posts, or the real files once."""
    from hpo.fixtures import write_sample

    encoder, encoder_name = encoder_path()
    max_length = 256  # the real job's window: the facts the sample keeps
    if args.data_dir:
        seeds: list[int | None] = [None]
    else:
        seeds = list(range(args.runs))
    runs: dict[str, list[dict]] = {baseline: [] for baseline in BASELINES}
    for seed in seeds:
        if seed is None:
            data = args.data_dir
        else:  # always the current generator's output, never an older folder's
            data = str(RUNS / NAME / f"data-{args.posts}-s{seed}-c{args.clarity}")
            write_sample(
                data, posts=args.posts, seed=seed, profile="realistic", clarity=args.clarity,
                force=True,
            )  # fmt: skip
        for baseline, run in one_run(data, seed, encoder, max_length).items():
            runs[baseline].append(run)
            print(f"[{NAME}] {baseline} seed {seed}: {run}", flush=True)
    real = bool(args.data_dir) and data_identity(args.data_dir)["data_kind"] == "real ReDSM5"
    target = None
    if not real:
        low, high = REAL_TEST["post-level"] - TOLERANCE, REAL_TEST["post-level"] + TOLERANCE
        target = {"key": "post-level", "within": [round(low, 4), round(high, 4)]}
    write_results(
        REAL_NAME if real else NAME,
        {
            "data": f"ReDSM5-format files ({args.data_dir})"
            if args.data_dir
            else f"{args.posts} generated realistic posts (clarity {args.clarity}), a seed a run",
            "split": {"fractions": SPLIT, "seed": 0, "by": "post"},
            "features": "TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True), fit "
            "on the training posts (or their sentences)",
            "model": "LogisticRegression(class_weight='balanced', max_iter=2000), one per symptom",
            "threshold": 0.5,
            "interval": "95% percentile bootstrap over the split's posts, 2,000 resamples, seed 0",
            "window": f"{encoder_name} tokens, head_tail {max_length}",
        },
        runs,
        "test_post_macro_f1",
        target,
        definition=DEFINITION,
        also=(
            "validation_post_macro_f1",
            "test_evidence_verbatim_in_train",
            "posts_over_window",
            "positive_pairs_outside_window",
        ),
        details=None if real else {"real_test": REAL_TEST, "targets": _targets(runs)},
        command=f"python -m bench.run --only {NAME}"
        + (f" --data-dir {args.data_dir}" if real else f" --posts {args.posts} --runs {args.runs}"),
        fewer_runs={"at_least": 1, "why": "one data set, deterministic fits: a run repeats"}
        if args.data_dir
        else None,
        data_dir=args.data_dir,
    )


def _targets(runs: dict) -> dict:
    """Each baseline's median test figure within TOLERANCE of the real one: met or missed."""
    found = {}
    for baseline, real in REAL_TEST.items():
        median = float(np.median([run["test_post_macro_f1"] for run in runs[baseline]]))
        found[baseline] = "met" if abs(median - real) <= TOLERANCE else "missed"
    return found
