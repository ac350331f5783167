"""``hpo data sample``: synthetic posts and annotations in the ReDSM5 layout, for tests and
the demo."""

from __future__ import annotations

from hpo.cli._common import OneLineErrors, _positive_int


def add_parser(subparsers) -> None:
    data = subparsers.add_parser("data", help="data utilities").add_subparsers(
        dest="data_command", required=True, parser_class=OneLineErrors
    )
    sample = data.add_parser("sample", help="write synthetic data in the ReDSM5 layout")
    sample.add_argument("out_dir")
    sample.add_argument("--posts", type=_positive_int, default=200)
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
