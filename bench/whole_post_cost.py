"""What a whole_post epoch costs against head_tail's (issue #56 item 4): one training epoch of
each on the same posts, split and settings (the recipe; whole_post with the sentence loss and
sqrt weighting, the portfolio's move), each in its own process at ``--threads`` torch threads,
the two alternated in rounds so that both meet the same load. Per round: the epoch's training
seconds (its steps; evaluation and set-up excluded), the encoder tokens its passes read with a
graph, and whole_post's time over head_tail's. ``--baseline COMMIT`` also times whole_post at
that commit (a git worktree of it) in every round: what a change saves, the same work both sides.

    python -m bench.run --only whole_post_cost --data-dir ../shared/redsm5 --runs 3 --threads 2

With ``--data-dir``, ``--posts N`` below the files' count times the first N posts only, copied to
a temporary folder outside the project and removed after (an epoch of every post takes minutes).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__":  # a child: hpo (and bench) from PYTHONPATH's checkout, not bench/
    sys.path.remove(str(Path(__file__).resolve().parent))

from bench.common import REPO, RUNS, child_env
from bench.results import write_results
from bench.startup import baseline_checkout
from bench.workload import RECIPE, SPLIT, data_words, encoder_path, sample_data
from hpo.fixtures.realistic import REAL_POSTS

NAME = "whole_post_cost"
DEFINITION = (
    "seconds of one whole_post training epoch (sentence loss 1.0, sqrt) over one head_tail "
    "epoch (the recipe), same posts and settings, evaluation excluded; target: at most 1.5"
)
TARGET = {"at_most": 1.5}
DEFAULTS = {"runs": 3, "max_length": 256}
WHOLE_POST = {
    "criteria_formulation": "whole_post",
    "long_text": "sentences",
    "evidence_loss_weight": 1.0,
    "class_weighting": "sqrt",
}
SIDES = ("head_tail", "whole_post")


def measure(args) -> None:
    if args.data_dir and args.posts < REAL_POSTS:
        with tempfile.TemporaryDirectory(prefix="hpo-first-posts-") as folder:
            _measure(args, first_posts(args.data_dir, args.posts, Path(folder)))
    else:
        _measure(args, sample_data(f"data-{NAME}", args.posts, args.data_dir))


def first_posts(data_dir: str, posts: int, into: Path) -> str:
    """The first ``posts`` posts of ReDSM5-format files and their annotations, into ``into``."""
    source = Path(data_dir)
    with (source / "redsm5_posts.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    kept = {row[0] for row in rows[1 : posts + 1]}
    with (into / "redsm5_posts.csv").open("w", newline="") as f:
        csv.writer(f).writerows(rows[: posts + 1])
    with (source / "redsm5_annotations.csv").open(newline="") as f:
        notes = list(csv.reader(f))
    with (into / "redsm5_annotations.csv").open("w", newline="") as f:
        csv.writer(f).writerows([notes[0], *(row for row in notes[1:] if row[0] in kept)])
    return str(into)


def _measure(args, data: str) -> None:
    encoder, encoder_name = encoder_path()
    baseline = baseline_checkout(args.baseline) if getattr(args, "baseline", None) else None
    sides = [(side, REPO) for side in SIDES] + ([("baseline", baseline[0])] if baseline else [])
    runs = []
    for round_no in range(args.runs):
        got = {}
        for side, checkout in sides[round_no % len(sides) :] + sides[: round_no % len(sides)]:
            got[side] = _epoch_in_process(side, checkout, data, args, encoder)
        run = {
            "ratio": round(got["whole_post"]["seconds"] / got["head_tail"]["seconds"], 3),
            "token_ratio": round(got["whole_post"]["tokens"] / got["head_tail"]["tokens"], 3),
            **{f"{side}_epoch_s": got[side]["seconds"] for side in got},
            **{f"{side}_tokens": got[side]["tokens"] for side in got},
        }
        if baseline:
            run["baseline_ratio"] = round(
                got["baseline"]["seconds"] / got["head_tail"]["seconds"], 3
            )
            run["saved_share"] = round(
                1 - got["whole_post"]["seconds"] / got["baseline"]["seconds"], 3
            )
        runs.append(run)
        print(f"[{NAME} round {round_no + 1}] {run}", flush=True)
    write_results(
        NAME,
        {
            "encoder": encoder_name,
            "data": data_words(args.data_dir, args.posts, SPLIT)
            + (
                f", its first {args.posts} posts"
                if args.data_dir and args.posts < REAL_POSTS
                else ""
            ),
            "recipe": {**RECIPE, "max_length": args.max_length},
            "whole_post": WHOLE_POST,
            "threads": args.threads,
            "baseline": baseline[1] if baseline else None,
            "rounds": "head_tail, whole_post (and the baseline's whole_post) in a rotating "
            "order, each epoch its own process",
        },
        {NAME: runs},
        "ratio",
        {"key": NAME, **TARGET},
        definition=DEFINITION,
        also=(
            "token_ratio",
            "head_tail_epoch_s",
            "whole_post_epoch_s",
            *(("baseline_epoch_s", "baseline_ratio", "saved_share") if baseline else ()),
        ),
        data_dir=args.data_dir or data,  # the whole files' digest: which data the posts are from
        fewer_runs=None
        if args.runs >= 5
        else {"at_least": args.runs, "why": "a whole_post epoch on the real posts takes minutes"},
        command=f"python -m bench.run --only {NAME} --runs {args.runs} --threads {args.threads}"
        + f" --posts {args.posts}"
        + (f" --data-dir {args.data_dir}" if args.data_dir else "")
        + (f" --baseline {args.baseline}" if baseline else ""),
    )


def _epoch_in_process(side: str, checkout: Path, data: str, args, encoder: str) -> dict:
    """One epoch of ``side`` in a child process importing ``hpo`` from ``checkout``."""
    out = RUNS / NAME / f"{side}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    settings = {
        "task": "criteria",
        "encoder": encoder,
        "data_dir": data,
        "criteria_formulation": "multilabel",
        "max_length": args.max_length,
        "threshold": "fixed",
        "objective_metric": "post_macro_f1",
        "split_seed": 0,
        "cache_dir": str(RUNS / NAME / "cache"),
        "split_fractions": SPLIT,
        **RECIPE,
        "epochs": 1,
        **({} if side == "head_tail" else WHOLE_POST),
    }
    env = child_env(args.threads, checkout)
    command = [sys.executable, str(Path(__file__).resolve()), json.dumps(settings), str(out)]
    subprocess.run(command, env=env, cwd=checkout, check=True, capture_output=True)
    return json.loads(out.read_text())


def one_epoch(settings: dict, out: str) -> None:
    """The child's whole job: one epoch with the ``hpo`` on its path (this commit's or the
    baseline's), nothing of bench imported."""
    import torch

    from hpo.train.config import TrainConfig
    from hpo.train.loop import train

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    result = train(
        TrainConfig(**{**settings, "split_fractions": tuple(settings["split_fractions"])})
    )
    Path(out).write_text(
        json.dumps(
            {
                "seconds": round(result.samples_trained / result.train_samples_per_second, 2),
                "tokens": result.tokens_trained,
            }
        )
    )


if __name__ == "__main__":  # the child _epoch_in_process starts; the measure is bench.run's
    one_epoch(json.loads(sys.argv[1]), sys.argv[2])
