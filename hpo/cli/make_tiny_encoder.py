"""``hpo make-tiny-encoder``: a small real encoder and tokenizer, built offline, for tests
and the demo."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "make-tiny-encoder", help="build a small real encoder + tokenizer offline"
    )
    parser.add_argument("out_dir")
    parser.add_argument("--arch", choices=["roberta", "deberta-v2"], default="roberta")
    parser.add_argument(
        "--masked-lm", action="store_true", help="save a masked-LM model (tied output layer)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace OUT_DIR and everything in it if it is not empty",
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.fixtures import make_tiny_encoder

    path = make_tiny_encoder(
        args.arch, args.out_dir, masked_lm=args.masked_lm, seed=args.seed, force=args.force
    )
    print(f"wrote a tiny {args.arch} encoder to {path}")
    return 0
