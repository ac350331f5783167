"""``hpo finalize``: retrain the best configurations with several seeds, choose one on
validation, score it once on the test split, save it with a model card."""

from __future__ import annotations

from hpo.cli._common import _positive_int, add_progress_arg, add_spec_args, add_threads_arg
from hpo.vocabulary import ENSEMBLES, REFITS


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "finalize",
        help="retrain the best configurations with several seeds, average the best one's seeds "
        "(or pick one) on validation, score it once on the test split, save it with a model card",
    )
    add_spec_args(parser, by_name=True)
    # --top-k, --seeds, --refit, --ensemble, --cv: None when not given, so a rerun of a finalized
    # study names those it ignores
    parser.add_argument("--top-k", type=_positive_int, help="configurations to retrain (default 3)")
    parser.add_argument("--seeds", type=_positive_int, help="seeds per configuration (default 3)")
    parser.add_argument(
        "--workers", type=_positive_int, default=1, help="parallel retrainings (default 1)"
    )
    add_threads_arg(parser, "per retraining", "the cores split evenly between --workers")
    parser.add_argument(
        "--refit",
        choices=REFITS,
        help="train: the chosen seed's model as retrained (default); train+val: retrain it once "
        "more on train + validation for its best epoch count, at the thresholds it chose",
    )
    parser.add_argument(
        "--ensemble",
        choices=ENSEMBLES,
        help="seeds: the chosen configuration's seeds averaged into one model, which hpo "
        "predict loads like any other (default with --seeds > 1); none: its best seed alone",
    )
    # int, not _positive_int: FinalizeOptions holds the one rule for K (2 or more, or 0 for none),
    # for the CLI and the Python API alike
    parser.add_argument(
        "--cv",
        type=int,
        metavar="K",
        help="also retrain the chosen configuration on K >= 2 folds of train + validation, each "
        "validated on the fold it left out: report the mean ± sd, and decide at per-symptom "
        "thresholds chosen on their out-of-fold predictions (0: none, the default)",
    )
    parser.add_argument(
        "--partial",
        action="store_true",
        help="finalize a search that is still running or short of n_trials, from its finished "
        "trials",
    )
    add_progress_arg(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from pydantic import ValidationError

    from hpo.errors import UsageError
    from hpo.final.options import ONE_MODEL_REFIT, FinalizeOptions
    from hpo.final.pipeline import finalize
    from hpo.process import shows_progress

    try:
        options = FinalizeOptions(
            top_k=args.top_k,
            seeds=args.seeds,
            refit=args.refit,
            ensemble=args.ensemble,
            cv=args.cv,
            workers=args.workers,
            threads=args.threads,
            partial=args.partial,
            progress=shows_progress(args.progress),
        )
    except ValidationError as exc:  # argparse checked the rest: --cv's range, and the pair
        if exc.errors()[0]["type"] == ONE_MODEL_REFIT:
            raise UsageError(
                "--refit train+val retrains one model, so it cannot be an ensemble; "
                "pass --ensemble none with it, or leave --refit out"
            ) from None
        raise UsageError(f"--cv K needs K >= 2 folds (or 0 for none), got {args.cv}") from None
    finalize(args.spec, args.overrides, args.storage, options)
    return 0
