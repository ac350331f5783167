"""``hpo data sample``: synthetic posts and annotations in the ReDSM5 layout, for tests and
the demo."""

from __future__ import annotations

import argparse

from hpo.cli._common import OneLineErrors, _positive_int

# The sample is built in memory before it is written: a bound, or a typo of a few zeros grows
# until the machine kills it. 100 times the real ReDSM5's 1,484 posts is room for any benchmark.
MAX_SAMPLE_POSTS = 150_000


def _sample_posts(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_SAMPLE_POSTS:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_SAMPLE_POSTS} (the real ReDSM5 has 1484), got {value}"
        )
    return value


def add_parser(subparsers) -> None:
    data = subparsers.add_parser("data", help="data utilities").add_subparsers(
        dest="data_command", required=True, parser_class=OneLineErrors
    )
    sample = data.add_parser("sample", help="write synthetic data in the ReDSM5 layout")
    sample.add_argument("out_dir")
    sample.add_argument("--posts", type=_sample_posts, default=200)
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument(
        "--profile",
        choices=("short", "realistic"),
        default="short",
        help="short: a few sentences a post, fast (default); realistic: "
        "lengths, sentence counts and label shares of the real ReDSM5",
    )
    sample.add_argument(
        "--force",
        action="store_true",
        help="replace redsm5_posts.csv and redsm5_annotations.csv already in OUT_DIR",
    )
    sample.set_defaults(func=run)


def run(args) -> int:
    from hpo.fixtures import write_sample

    path = write_sample(
        args.out_dir, posts=args.posts, seed=args.seed, profile=args.profile, force=args.force
    )
    print(f"wrote {args.posts} {args.profile} sample posts to {path}")
    return 0
