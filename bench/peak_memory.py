"""Peak memory of one trial of issue #25's workload: all-MiniLM-L6-v2, criteria multilabel,
max_length 256, batch 16, float32, ``long_text`` truncate and head_tail, each run a fresh
process (its peak RSS from RUSAGE_CHILDREN), the trial as a worker runs it (bench/common.py's
TRIAL: its memory ceiling set, above which it hands glibc's freed heap back; 2 torch threads).

    python -m bench.run --only peak_memory
"""

from __future__ import annotations

from bench.common import RUNS, trial_peak
from bench.results import write_results
from bench.workload import encoder_path, sample_data

NAME = "peak_memory"
DEFINITION = (
    "peak RSS (MiB) of one trial in a fresh process: all-MiniLM-L6-v2, multilabel, max_length "
    "256, batch 16; the worse of long_text truncate and head_tail per run"
)
POSTS = 80  # 64 training posts: 4 steps of 16 posts, one epoch (the issue's run had 1,187)
# issue #25: peak_memory_mb of one such trial on the real data before #29, one thread
ISSUE_PEAK_MB = 4099
CASES = {
    "truncate": {"long_text": "truncate"},
    "head_tail": {"long_text": "head_tail"},
    "truncate, micro_batch_tokens off": {"long_text": "truncate", "micro_batch_tokens": None},
}
HEADLINE = ("truncate", "head_tail")


def measure(args) -> None:
    """``args.runs`` runs of each headline case (two of the others), each a fresh process."""
    encoder, encoder_name = encoder_path()
    runs = args.runs
    data = sample_data(f"data-{POSTS}", POSTS, args.data_dir)
    results: dict[str, list[dict]] = {case: [] for case in CASES}
    for run_no in range(runs):
        for case, overrides in CASES.items():
            if (
                case not in HEADLINE and run_no >= 2
            ):  # what the bound gives: two runs are enough to show it
                continue
            settings = {
                "task": "criteria",
                "encoder": encoder,
                "data_dir": data,
                "epochs": 1,
                "max_length": 256,
                "batch_size": 16,
                "criteria_formulation": "multilabel",
                "class_weighting": "balanced",
                "learning_rate": 5e-5,
                "mixed_precision": "no",
                "cache_dir": str(RUNS / "peak-memory-cache"),
                "split_fractions": [0.8, 0.1, 0.1],
                **overrides,
            }
            run = trial_peak(settings)
            results[case].append(run)
            print(
                f"[peak_memory run {run_no + 1}] {case}: {run['peak_rss_mb']:,.0f} MiB", flush=True
            )
    worst = {
        "worst of truncate and head_tail": [
            {"peak_rss_mb": max(results[c][i]["peak_rss_mb"] for c in HEADLINE)}
            for i in range(runs)
        ]
    }
    write_results(
        NAME,
        {
            "encoder": encoder_name,
            "data": f"{POSTS} generated realistic posts (seed 0), "
            "split 0.8/0.1/0.1 by post: one epoch of 64 training posts",
            "task": "criteria multilabel, max_length 256, batch 16, 1 epoch, float32, "
            "micro_batch_tokens auto (1024 on CPU) unless the case says off",
            "threads": 2,
            "issue_peak_mb": ISSUE_PEAK_MB,
            "issue_peak_note": "issue #25: peak_memory_mb of one trial on the real ReDSM5 "
            "(1,187 training posts, one thread) before #29; not re-run here",
        },
        {**results, **worst},
        "peak_rss_mb",
        {"key": "worst of truncate and head_tail", "at_most": 1536},
        definition=DEFINITION,
        command="python -m bench.run --only peak_memory",
    )
