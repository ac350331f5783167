"""Peak memory of one `long_text: chunks` trial on long-tailed posts: does a step's memory stay
bounded however long the posts are?

    python -m bench.run --only memory         # 5 runs of the headline case, one of each other

Workload: all-MiniLM-L6-v2 (offline), criteria multilabel, long_text chunks, 1 epoch, float32,
one process with 2 torch threads, on a realistic sample shaped like the real ReDSM5's tail: 1,484
generated posts (p99 ~3,300 tokens, max ~8,400), of which the 40 longest and 40 others drawn at
random are kept, so the batches that draw the longest posts (length-grouped batching puts them
together) are in the run. Each run is a fresh process; its peak RSS is the kernel's (wait4's
ru_maxrss). "after x2 longest" doubles the longest post (to ~17,000 tokens) to show the peak
does not follow it.

The cases are named "after" for the committed results file's sake: its "before" cases ran the
code of eb3db4a, before steps were bounded (#29), and were stopped at 10 GB. That half was
removed once answered; 9990d4f last had it.
"""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

from bench.common import RUNS, trial_peak
from bench.results import write_results
from bench.workload import encoder_path, sample_data

NAME = "memory"
DEFINITION = (
    "peak RSS (MiB) of one long_text: chunks trial on long-tailed posts, in a fresh process "
    "(bench/memory.py)"
)
HEADLINE = "after batch=16 max_length=256"
CASES = [(16, 256), (32, 256), (16, 512), (32, 512)]  # (batch_size, max_length)


def long_tailed_data(double_longest: bool = False) -> Path:
    """The 40 longest of 1,484 realistic posts and 40 others, with their annotations."""
    full = Path(sample_data("memory-1484", 1484))
    out = RUNS / ("memory-tail-x2" if double_longest else "memory-tail")
    if (out / "redsm5_posts.csv").exists():
        return out
    csv.field_size_limit(sys.maxsize)
    with open(full / "redsm5_posts.csv", newline="") as f:
        posts = list(csv.DictReader(f))
    by_length = sorted(posts, key=lambda p: len(p["text"]), reverse=True)
    rest = by_length[40:]
    kept = by_length[:40] + random.Random(0).sample(rest, 40)
    if double_longest:
        kept[0] = {**kept[0], "text": kept[0]["text"] + "\n\n" + kept[0]["text"]}
    ids = {p["post_id"] for p in kept}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "redsm5_posts.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["post_id", "text"])
        writer.writeheader()
        writer.writerows(kept)
    with (
        open(full / "redsm5_annotations.csv", newline="") as f,
        open(out / "redsm5_annotations.csv", "w", newline="") as g,
    ):
        reader = csv.DictReader(f)
        writer = csv.DictWriter(g, fieldnames=reader.fieldnames)
        writer.writeheader()
        writer.writerows(row for row in reader if row["post_id"] in ids)
    return out


def settings(encoder: str, data_dir: Path, batch: int, max_length: int) -> dict:
    return {
        "task": "criteria",
        "encoder": encoder,
        "data_dir": str(data_dir),
        "epochs": 1,
        "max_length": max_length,
        "batch_size": batch,
        "criteria_formulation": "multilabel",
        "long_text": "chunks",
        "class_weighting": "balanced",
        "learning_rate": 1e-4,
        "mixed_precision": "no",
        "cache_dir": str(RUNS / "memory-cache"),
        "split_fractions": [0.8, 0.1, 0.1],
    }


def measure(args) -> None:
    """``args.runs`` runs of the headline case, one of each other; written after every run, so
    a bench cut short keeps what it measured."""
    encoder, encoder_name = encoder_path()
    data, doubled = long_tailed_data(), long_tailed_data(double_longest=True)
    plan = [(f"after batch={b} max_length={n}", settings(encoder, data, b, n)) for b, n in CASES]
    plan.append(("after x2 longest batch=16 max_length=256", settings(encoder, doubled, 16, 256)))
    results: dict[str, list[dict]] = {}
    for repeat in range(args.runs):
        for case, trial in plan if repeat == 0 else plan[:1]:
            results.setdefault(case, []).append(trial_peak(trial))
            _write(results, encoder_name)
            run = results[case][-1]
            print(
                f"[memory run {repeat + 1}] {case}: peak {run['peak_rss_mb']:,.0f} MiB, "
                f"{run['seconds']:.0f} s, post macro-F1 {run['post_macro_f1']:.3f}",
                flush=True,
            )


def _write(results: dict, encoder_name: str) -> Path:
    workload = {
        "encoder": encoder_name,
        "task": "criteria multilabel, long_text chunks, 1 epoch, float32",
        "data": "realistic sample: the 40 longest of 1,484 generated posts + 40 others (seed 0)",
        "threads": 2,
    }
    return write_results(
        NAME,
        workload,
        results,
        "peak_rss_mb",
        {"key": HEADLINE, "at_most": 2048},
        definition=DEFINITION,
        command=f"python -m bench.run --only {NAME}",
    )
