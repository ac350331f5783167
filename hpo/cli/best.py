"""``hpo best``: the best trial's parameters, metrics and checkpoint; ``hpo tune`` ends with
the same lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpo.cli._common import add_study_args

if TYPE_CHECKING:
    from hpo.study import BestTrial


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "best", help="the best trial's parameters, metrics and checkpoint"
    )
    add_study_args(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.study import best_trial
    from hpo.study.records import load_study_ref

    study = load_study_ref(args.study, args.storage)
    print_best(best_trial(study), study.study_name)
    return 0


def print_best(best: BestTrial | None, study: str) -> None:
    if best is None:
        print(f"study {study} has no completed trial yet")
        return
    from hpo.study import interval_words

    print(f"best trial {best.number}: {best.metric} = {best.value:.4f}{interval_words(best)}")
    print("  params: " + ", ".join(f"{k}={v}" for k, v in best.params.items()))
    if best.metrics:
        print("  metrics: " + ", ".join(f"{k}={v:.4f}" for k, v in best.metrics.items()))
    for spread in best.spread:
        print(
            f"  seed spread of trial {spread['trial']}'s configuration ({spread['source']}): "
            f"{best.metric} {spread['mean']:.4f} ± {spread['sd']:.4f} sd over {spread['n']}, "
            f"min {spread['min']:.4f}, max {spread['max']:.4f}"
        )
    if best.checkpoint:
        print(f"  checkpoint: {best.checkpoint}")
    elif best.checkpoint_refused:
        print(f"  {best.checkpoint_refused}")
