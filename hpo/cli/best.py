"""``hpo best``: the best trial's parameters, metrics and checkpoint; ``hpo tune`` ends with
the same lines."""

from __future__ import annotations

from pathlib import Path

from hpo.cli._common import add_study_args


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("best", help="the best trial's parameters, metrics and checkpoint")
    add_study_args(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from hpo.study import load_study_ref

    study = load_study_ref(args.study, args.storage)
    print_best(best_trial(study), study.study_name)
    return 0


def print_best(best: dict | None, study: str) -> None:
    if best is None:
        print(f"study {study} has no completed trial yet")
        return
    print(f"best trial {best['number']}: {best['metric']} = {best['value']:.4f}")
    print("  params: " + ", ".join(f"{k}={v}" for k, v in best["params"].items()))
    if best["metrics"]:
        print("  metrics: " + ", ".join(f"{k}={v:.4f}" for k, v in best["metrics"].items()))
    if best["checkpoint"]:
        print(f"  checkpoint: {best['checkpoint']}")
    elif best["checkpoint_refused"]:
        print(f"  {best['checkpoint_refused']}")


def best_trial(study) -> dict | None:
    """The best trial's number, value, parameters, metrics and checkpoint (if it still exists
    and is this trial's); ``checkpoint_refused`` says why an existing one is not shown."""
    try:
        trial = study.best_trial
    except ValueError:
        return None
    checkpoint = trial.user_attrs.get("checkpoint")
    if not checkpoint or not Path(checkpoint).exists():
        checkpoint = None
    refused = _foreign_checkpoint(study, trial.number, checkpoint) if checkpoint else None
    return {"number": trial.number, "metric": study.user_attrs.get("metric", "value"), "value": trial.value,
            "params": dict(trial.params), "metrics": trial.user_attrs.get("metrics") or {},
            "checkpoint": None if refused else checkpoint, "checkpoint_refused": refused}


def _foreign_checkpoint(study, number: int, checkpoint: str) -> str | None:
    """Why ``checkpoint`` is not trial ``number``'s of ``study``, or None if it is.

    Its folder's metrics.json must name this study's uid and this trial: a study of the
    same name elsewhere (another storage, or deleted and re-created) may have written
    the folder since, and its weights would be shown beside these parameters.
    """
    from hpo.outputs import UID_DIGITS, recorded_owner
    from hpo.study import study_uid

    uid = study_uid(study)
    owner_uid, owner_trial = recorded_owner(checkpoint)
    if uid is not None and (owner_uid, owner_trial) == (uid, number):
        return None
    if owner_uid is None:
        return (f"the checkpoint at {checkpoint} is not recorded as this study's "
                "(no study uid in its metrics.json); not shown")
    if owner_uid != uid:
        return (f"the checkpoint at {checkpoint} belongs to another study "
                f"(its metrics.json names study {str(owner_uid)[:UID_DIGITS]}); not shown")
    return f"the checkpoint at {checkpoint} belongs to trial {owner_trial}, not trial {number}; not shown"
