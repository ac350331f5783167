"""``hpo predict``: a saved model (a trial checkpoint or a final model) on posts, as a CSV; or,
with ``--criteria`` and ``--evidence``, the joined prediction as JSON lines (and an HTML report).
A tqdm bar of posts on standard error meanwhile where that is a terminal (elsewhere, or with
--no-progress, a line at each tenth of the posts), one throughput line at the end."""

from __future__ import annotations

import sys
from pathlib import Path

from hpo.cli._common import (
    _non_negative_int,
    _positive_int,
    add_progress_arg,
    add_threads_arg,
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "predict",
        help="run a saved model (a trial checkpoint or a final model) on "
        "posts, or a criteria and an evidence model together",
    )
    parser.add_argument(
        "model_dir", nargs="?", help="the model folder: a trial's checkpoint/ or finalize's model"
    )
    parser.add_argument(
        "--criteria",
        help="joined prediction: the criteria study's final/model; needs --evidence unless it is "
        "a whole_post model, which ranks each post's sentences itself",
    )
    parser.add_argument(
        "--evidence",
        help="joined prediction: the evidence study's final/model, trained on the "
        "same data and criterion texts; its top sentences are found for each symptom --criteria "
        "finds (a whole_post --criteria model ranks them itself where it does so at least as "
        "well on validation)",
    )
    parser.add_argument(
        "--html", help="joined prediction: also write a self-contained HTML report of the posts"
    )
    parser.add_argument(
        "--input",
        required=True,
        help="posts as .csv or .jsonl with post_id and text "
        "(the layout of ReDSM5's redsm5_posts.csv)",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="CSV to write (joined prediction: JSON lines); it appears only once complete",
    )
    parser.add_argument(
        "--batch-size",
        type=_positive_int,
        default=64,
        help="sequences per forward pass (default 64)",
    )
    parser.add_argument(
        "--device", default="auto", help="auto (a GPU when there is one), cpu, cuda or cuda:N"
    )
    parser.add_argument(
        "--top-k",
        type=_non_negative_int,
        default=3,
        help="evidence: sentences kept per post and symptom (default 3; 0: all)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out file that is not an "
        "earlier predictions CSV (never the --input file, the model folder or a database)",
    )
    add_threads_arg(parser, "on the CPU", "every core")
    add_progress_arg(parser, "a progress line at each tenth of the posts, and every 30 s")
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.errors import UsageError
    from hpo.process import shows_progress

    # before any model loads or post is scored: a missing folder would be found only at the end
    for flag, path in (("--out", args.out), ("--html", args.html)):
        if path and not Path(path).parent.is_dir():
            raise UsageError(
                f"{flag} {path}: its folder {Path(path).parent} does not exist; create it or "
                "choose another path"
            )
    progress = shows_progress(args.progress)
    if args.criteria or args.evidence or args.html:
        return _run_pair(args, progress)
    if not args.model_dir:
        raise UsageError(
            "hpo predict needs a model folder, or --criteria and --evidence for the joined "
            "prediction"
        )
    s = model_on_file(
        args.model_dir,
        args.input,
        args.out,
        args.batch_size,
        args.device,
        args.top_k,
        progress=progress,
        force=args.force,
        threads=args.threads,
    )
    print(
        f"predicted {s.posts} posts in {s.predict_seconds:.1f} s "
        f"({s.posts_per_second:.1f} posts/s; loading "
        f"took {s.load_seconds:.1f} s): {s.rows} rows of {s.task} predictions in {args.out}",
        file=sys.stderr,
    )
    return 0


def _run_pair(args, progress: bool) -> int:
    from hpo.errors import UsageError

    if args.model_dir and not (args.criteria or args.evidence):  # --html alone
        raise UsageError(
            "--html needs the joined prediction: pass --criteria and --evidence model folders "
            f"instead of {args.model_dir}, or drop --html for {args.model_dir}'s CSV"
        )
    if args.model_dir:
        raise UsageError(
            f"give either a model folder ({args.model_dir}) or --criteria and --evidence, not both"
        )
    if not args.criteria:
        if not args.evidence:
            raise UsageError(
                "--html needs the joined prediction: pass --criteria and --evidence model folders"
            )
        raise UsageError(
            "--evidence needs --criteria too: pass the criteria study's final/model and the "
            "evidence study's final/model"
        )
    s = pair_on_file(
        args.criteria,
        args.evidence,
        args.input,
        args.out,
        args.html,
        args.batch_size,
        args.device,
        args.top_k,
        progress=progress,
        force=args.force,
        threads=args.threads,
    )
    if s.unchecked_data:
        print(f"hpo: warning: {s.unchecked_data}", file=sys.stderr)
    if s.evidence_by:
        print(f"evidence: {s.evidence_by}", file=sys.stderr)
    report = f" and the report in {args.html}" if args.html else ""
    print(
        f"explained {s.posts} posts in {s.criteria_seconds + s.evidence_seconds:.1f} s "
        f"({s.posts_per_second:.1f} posts/s; criteria {s.criteria_seconds:.1f} s, evidence "
        f"{s.evidence_seconds:.1f} s for {s.found} symptoms found; "
        f"loading took {s.load_seconds:.1f} s): "
        f"{args.out}{report}",
        file=sys.stderr,
    )
    return 0


def model_on_file(
    model_dir: str,
    input_path: str,
    out: str,
    batch_size: int,
    device: str,
    top_k: int,
    progress: bool = True,
    force: bool = False,
    threads: int | None = None,
):
    """Every post of ``input_path`` through the model at ``threads`` CPU threads (None: every
    core), a CSV at ``out`` and a tqdm bar of posts (stderr; ``progress`` False: progress lines)
    meanwhile; returns the ``FileSummary`` for the throughput line."""
    from contextlib import ExitStack

    from tqdm import tqdm

    from hpo.models.loading import hide_progress_bars
    from hpo.predict import ProgressLines, predict_file

    busy = _use_threads(threads)
    if not progress:
        hide_progress_bars()
    with ExitStack() as bars:  # the bar starts once the posts are read and the model loaded

        def start(total: int):
            if not progress:
                return ProgressLines(total).update
            return bars.enter_context(tqdm(total=total, unit="post", dynamic_ncols=True)).update

        summary = predict_file(
            model_dir,
            input_path,
            out,
            batch_size,
            device,
            top_k or None,
            progress=start,
            force=force,
        )
    if busy:  # after the predictions, never before a refusal
        print(busy, file=sys.stderr)
    return summary


def pair_on_file(
    criteria_dir: str,
    evidence_dir: str | None,
    input_path: str,
    out: str,
    html: str | None,
    batch_size: int,
    device: str,
    top_k: int,
    progress: bool = True,
    force: bool = False,
    threads: int | None = None,
):
    """The joined prediction of every post of ``input_path`` as JSON lines at ``out`` (and the
    HTML report at ``html``) at ``threads`` CPU threads, with a tqdm bar of posts for each
    half; returns the ``ExplainSummary`` for the throughput line."""
    from contextlib import ExitStack

    from tqdm import tqdm

    from hpo.explain import explain_file
    from hpo.models.loading import hide_progress_bars
    from hpo.predict import ProgressLines

    busy = _use_threads(threads)
    if not progress:
        hide_progress_bars()
    with ExitStack() as bars:

        def start(total: int, half: str):  # each half counts every post once
            if not progress:
                return ProgressLines(total, f"{half}:").update
            return bars.enter_context(
                tqdm(total=total, unit="post", desc=half, dynamic_ncols=True)
            ).update

        summary = explain_file(
            criteria_dir,
            evidence_dir,
            input_path,
            out,
            html,
            batch_size,
            device,
            top_k or None,
            progress=start,
            force=force,
        )
    if busy:
        print(busy, file=sys.stderr)
    return summary


def _use_threads(threads: int | None) -> str | None:
    """Torch's CPU threads for this process: ``threads``, or the cores other work leaves idle,
    as ``hpo tune`` gives its one worker (``threads_per_process``); the line that says so when
    that is fewer."""
    import torch

    from hpo.process import free_cpus, threads_per_process

    free = free_cpus()
    torch.set_num_threads(threads_per_process(1, threads, free.cpus))
    return None if threads else free.words(torch.get_num_threads(), "for prediction")
