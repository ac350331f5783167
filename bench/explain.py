"""The joined prediction (``hpo predict --criteria --evidence``): throughput, each half's share
of the time, and whether the sentences it shows are the ones annotators marked.

    python -m bench.run --only explain   # writes bench/results/explain.json: ~10 CPU-minutes
                                         # (16 min wall on 2 busy shared cores)

Workload: the realistic sample (200 generated posts shaped like ReDSM5, seed 0) split by post
0.6/0.2/0.2, the offline all-MiniLM-L6-v2; a criteria model (multilabel, max_length 256,
per-symptom thresholds tuned on validation) and an evidence model (positive_criteria pairs,
max_length 128) trained briefly on the train split; 2 torch threads, float32. Throughput: the
first 10 held-out test posts explained ``--runs`` times after one warm-up (the evidence half's
cost follows the symptoms found times the sentences, so the figure is per this workload).

Joint metric, over all test posts in one pass: of the (post, symptom) where the symptom is truly
present (a status-1 annotation), the criteria model finds it, and at least one annotated sentence
aligned to a split sentence, the share where an annotated sentence is ranked first (top 1) or
among the three shown (top 3). Criteria recall says how many true symptoms reach that stage.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch

from bench.results import write_results
from bench.workload import encoder_path, sample_data
from hpo.data import (
    SYMPTOMS,
    evidence_candidates,
    load_descriptions,
    load_redsm5,
    split_posts,
    symptom_profiles,
)
from hpo.data.sentences import split_sentences
from hpo.explain import Explanation, Explanations, load_pair
from hpo.train.config import TrainConfig
from hpo.train.loop import train

NAME = "explain"
DEFINITION = (
    "posts per second of hpo predict --criteria --evidence: the criteria model, then the "
    "evidence model over the sentences of each symptom it finds, on the first held-out test "
    "posts after one warm-up"
)
POSTS, FRACTIONS, SPLIT_SEED = 200, (0.6, 0.2, 0.2), 0
TOP_K = 3
TIMED_POSTS = 10  # the first test posts, explained --runs times; the joint metric uses all of them
THREADS = 2
COMMON = dict(
    split_fractions=FRACTIONS,
    split_seed=SPLIT_SEED,
    batch_size=16,
    mixed_precision="no",
    device="cpu",
    seed=0,
    pooling="mean",
    class_weighting="balanced",
)
CRITERIA = dict(
    task="criteria",
    criteria_formulation="multilabel",
    max_length=256,
    epochs=2,
    learning_rate=1e-4,
    threshold="tuned",
    objective_metric="post_macro_f1",
)
EVIDENCE = dict(
    task="evidence",
    evidence_scope="positive_criteria",
    max_length=128,
    epochs=1,
    learning_rate=5e-5,
    evidence_negative_ratio=2.0,
)


def train_pair(encoder: str, data_dir: str, out: Path) -> dict[str, float]:
    """Both finals of this bench, saved under ``out``; each one's training seconds."""
    seconds = {}
    for name, settings in (("criteria", CRITERIA), ("evidence", EVIDENCE)):
        started = time.perf_counter()
        train(
            TrainConfig(
                encoder=encoder,
                data_dir=data_dir,
                checkpoint_dir=str(out / name),
                **COMMON,
                **settings,
            )
        )
        seconds[name] = round(time.perf_counter() - started, 1)
    return seconds


def gold(
    data_dir: str,
) -> tuple[list[str], list[str], set[tuple[str, str]], set[tuple[str, str, str]]]:
    """The test split's post ids and texts, its (post, symptom) truly present, and the annotated
    sentences of each as split sentences' texts (the alignment training uses)."""
    corpus = load_redsm5(data_dir)
    test = split_posts(symptom_profiles(corpus), FRACTIONS, seed=SPLIT_SEED).test
    held_out = set(test)
    present = {
        (a.post_id, a.symptom)
        for a in corpus.annotations
        if a.status == 1 and a.post_id in held_out and a.symptom in SYMPTOMS
    }
    examples, _ = evidence_candidates(corpus, load_descriptions(), "positive_criteria")
    annotated = {
        (e.post_id, e.criterion, e.text_b)
        for e in examples
        if e.label == 1 and e.post_id in held_out
    }
    return list(test), [corpus.posts[post_id].text for post_id in test], present, annotated


def joint_metric(
    ids: list[str], posts: list[Explanation], present: set, annotated: set
) -> dict[str, float]:
    found = {
        (post_id, symptom)
        for post_id, post in zip(ids, posts, strict=True)
        for symptom in post.present
    }
    with_sentence = {key[:2] for key in annotated}
    judged = sorted(present & found & with_sentence)
    by_id = dict(zip(ids, posts, strict=True))

    def hit(post_id: str, symptom: str, k: int) -> bool:
        return any(
            (post_id, symptom, s.text) in annotated
            for s in by_id[post_id].findings[symptom].evidence[:k]
        )

    return {
        "judged_pairs": len(judged),
        "criteria_recall": round(len(present & found) / max(len(present), 1), 4),
        "top1": round(sum(hit(*pair, 1) for pair in judged) / max(len(judged), 1), 4),
        "top3": round(sum(hit(*pair, 3) for pair in judged) / max(len(judged), 1), 4),
    }


def measure(args) -> None:
    """Trains the pair once, then ``args.runs`` timed passes over the first test posts."""
    torch.set_num_threads(THREADS)
    encoder, encoder_name = encoder_path()
    data_dir = sample_data("explain-realistic", POSTS, args.data_dir)
    ids, texts, present, annotated = gold(data_dir)
    with tempfile.TemporaryDirectory(prefix="hpo-explain-") as tmp:
        train_seconds = train_pair(encoder, data_dir, Path(tmp))
        print(f"trained the pair in {train_seconds}", flush=True)
        pair = load_pair(Path(tmp) / "criteria", Path(tmp) / "evidence", device="cpu")
        # also the warm-up: first-call allocations, lazy pysbd import
        everything = pair.explain(texts, TOP_K)
        quality = {
            **joint_metric(ids, everything.posts, present, annotated),
            **timing(texts, everything),
        }
        print(f"[all {len(texts)} test posts] {quality}", flush=True)
        timed, runs = texts[:TIMED_POSTS], []
        for repeat in range(args.runs):
            runs.append(timing(timed, pair.explain(timed, TOP_K)))
            print(f"[run {repeat + 1}] {runs[-1]}", flush=True)
    workload = {
        "encoder": encoder_name,
        "data": args.data_dir or f"realistic sample, {POSTS} posts (seed 0)",
        "split": {"fractions": FRACTIONS, "seed": SPLIT_SEED, "test_posts": len(texts)},
        "timed_posts": f"the first {len(timed)} test posts",
        "criteria": CRITERIA,
        "evidence": EVIDENCE,
        "common": COMMON,
        "train_seconds": train_seconds,
        "top_k": TOP_K,
        "threads": THREADS,
        "precision": "float32",
        "device": "CPU only: no GPU was lent to this session, so there is no GPU figure",
        "joint_metric": "over (post, symptom) truly present, found by the criteria model and "
        "with an annotated sentence: share with an annotated sentence ranked first (top1) "
        "or among the top 3 (top3)",
        "quality_all_test_posts": quality,
    }
    path = write_results(
        NAME,
        workload,
        {"joined": runs},
        "posts_per_second",
        definition=DEFINITION,
        command=f"python -m bench.run --only {NAME}",
    )
    print(
        f"wrote {path}: {statistics.median(r['posts_per_second'] for r in runs):.2f} posts/s "
        f"(median), evidence share {statistics.median(r['evidence_share'] for r in runs):.0%}; "
        f"on all test posts top1 {quality['top1']}, top3 {quality['top3']} "
        f"over {quality['judged_pairs']} pairs"
    )


def timing(texts: list[str], result: Explanations) -> dict:
    """One pass's throughput, each half's share, and the evidence pairs the symptoms found cost
    (against scoring every sentence for all nine)."""
    total = result.criteria_seconds + result.evidence_seconds
    sentences = [len(split_sentences(text)) for text in texts]
    return {
        "posts_per_second": round(len(texts) / total, 3),
        "seconds": round(total, 3),
        "criteria_seconds": round(result.criteria_seconds, 3),
        "evidence_seconds": round(result.evidence_seconds, 3),
        "criteria_share": round(result.criteria_seconds / total, 4),
        "evidence_share": round(result.evidence_seconds / total, 4),
        "symptoms_found": sum(len(post.present) for post in result.posts),
        "evidence_pairs": sum(
            n * len(post.present) for n, post in zip(sentences, result.posts, strict=True)
        ),
        "evidence_pairs_all_nine": 9 * sum(sentences),
    }
