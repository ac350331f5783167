"""The ``hpo`` command: parses arguments and calls one function per subcommand."""

from __future__ import annotations

import argparse
import sys

from hpo.errors import UsageError


def _make_tiny_encoder(args) -> None:
    from hpo.models.tiny import make_tiny_encoder

    path = make_tiny_encoder(args.arch, args.out_dir, masked_lm=args.masked_lm, seed=args.seed)
    print(f"wrote a tiny {args.arch} encoder to {path}")


def _data_sample(args) -> None:
    from hpo.data.sample import write_sample

    path = write_sample(args.out_dir, posts=args.posts, seed=args.seed)
    print(f"wrote {args.posts} sample posts to {path}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hpo", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    tiny = commands.add_parser("make-tiny-encoder", help="build a small real encoder + tokenizer offline")
    tiny.add_argument("out_dir")
    tiny.add_argument("--arch", choices=["roberta", "deberta-v2"], default="roberta")
    tiny.add_argument("--masked-lm", action="store_true", help="save a masked-LM model (tied output layer)")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.set_defaults(func=_make_tiny_encoder)

    data = commands.add_parser("data", help="data utilities").add_subparsers(dest="data_command", required=True)
    sample = data.add_parser("sample", help="write synthetic data in the ReDSM5 layout")
    sample.add_argument("out_dir")
    sample.add_argument("--posts", type=_positive_int, default=200)
    sample.add_argument("--seed", type=int, default=0)
    sample.set_defaults(func=_data_sample)
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _quiet_libraries() -> None:
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    try:
        args.func(args)
    except UsageError as exc:
        print(f"hpo: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
