"""A retraining finalize need not run: a completed trial's kept checkpoint *is* its
configuration's run at the trial's own seed on the search's split, where the trial trained
with the settings that run would (the digest it recorded, ``TrainConfig.training_digest``)
and ran its schedule to the end (early stopping is part of the schedule; the study's time
budget is not). Training is deterministic for a seed on one machine: on CPU such a retraining
reproduced its trial's validation value to the fourth decimal after 24 minutes. So that run
is the trial's checkpoint, hard-linked into the run's folder (a copy across file systems):
the search may delete a checkpoint that drops out of its top-k meanwhile, and a link keeps
the files. Its seal is checked there, as a loaded model's is, and its digest against the one
the trial recorded when it saved the folder (``CHECKPOINT_SEAL_ATTR``): a sound seal says the
folder is a model hpo saved, not that it is this trial's (another trial's folder copied over
it is sealed too). A checkpoint that fails either is retrained.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from hpo.attributes import (
    BEST_EPOCH_ATTR,
    CHECKPOINT_ATTR,
    CHECKPOINT_SEAL_ATTR,
    EPOCHS_RUN_ATTR,
    SEED_ATTR,
    STOPPED_BY_ATTR,
    TRAINING_DIGEST_ATTR,
    WALL_SECONDS_ATTR,
)
from hpo.errors import UsageError
from hpo.models.classifier_file import (
    FILE_NAME,
    InvalidClassifierFile,
    check_integrity,
    read_classifier_file,
)
from hpo.outputs import recorded_owner
from hpo.study.records import trial_metrics
from hpo.train.config import TrainConfig

STAGING = ".reused"  # beside a run's model folder: the checkpoint linked in, until checked
NOT_KEPT = "its checkpoint was not kept (keep_top_k) or is gone"


@dataclass(frozen=True)
class Reuse:
    """Whether the run at a trial's own seed is that trial's kept checkpoint, and why
    (or why not), for the plan."""

    trial: int
    why: str
    checkpoint: str | None = None  # None: the run is retrained
    seal: str | None = None  # the checkpoint's seal digest, as the trial recorded it
    # the trial's validation figures, as a retraining's result.json holds them
    record: dict | None = None


def judge(trial, config: TrainConfig, uid: str | None) -> Reuse:
    """Whether ``trial``, of the study of uid ``uid``, stands for the run ``config``
    describes; the cheap checks first, the seal (which reads the weights) last."""
    attrs = trial.user_attrs
    if trial.state.name != "COMPLETE":  # a pruned trial stopped where its rivals were ahead
        return Reuse(trial.number, f"it is {trial.state.name.lower()}, not complete")
    if config.cv_fold is not None or config.train_on != "train":
        return Reuse(trial.number, "a fold or refit trains on other posts than the trial did")
    if not attrs.get(CHECKPOINT_ATTR):
        return Reuse(trial.number, NOT_KEPT)
    if attrs.get(SEED_ATTR) != config.seed:
        return Reuse(trial.number, f"it ran seed {attrs.get(SEED_ATTR)}, not {config.seed}")
    if stopped := attrs.get(STOPPED_BY_ATTR):
        return Reuse(trial.number, f"it was stopped by {stopped}")
    if TRAINING_DIGEST_ATTR not in attrs:
        return Reuse(trial.number, "it recorded no training settings (an earlier hpo)")
    if attrs[TRAINING_DIGEST_ATTR] != config.training_digest():
        return Reuse(
            trial.number,
            "it trained with other settings than this finalize's "
            "(a --set here, or the spec changed since)",
        )
    if CHECKPOINT_SEAL_ATTR not in attrs:
        return Reuse(trial.number, "it recorded no checkpoint seal (an earlier hpo)")
    epochs = attrs.get(EPOCHS_RUN_ATTR)
    if epochs != config.epochs and config.early_stopping_patience is None:
        return Reuse(trial.number, f"it ran {epochs} of {config.epochs} epochs")
    seal = attrs[CHECKPOINT_SEAL_ATTR]
    if problem := checkpoint_problem(attrs.get(CHECKPOINT_ATTR), uid, trial.number, seal):
        return Reuse(trial.number, problem)
    return Reuse(
        trial.number,
        "its kept checkpoint is this run",
        checkpoint=str(Path(attrs[CHECKPOINT_ATTR]).resolve()),
        seal=seal,
        record={
            "value": trial.value,
            "best_epoch": attrs[BEST_EPOCH_ATTR],
            # as the study records them: to its four decimals
            "metrics": trial_metrics(trial),
            "wall_seconds": attrs.get(WALL_SECONDS_ATTR),  # the trial's training
        },
    )


def checkpoint_problem(
    checkpoint: str | None, uid: str | None, number: int, seal: str | None
) -> str | None:
    """Why ``checkpoint`` cannot stand for trial ``number`` of the study of uid ``uid``, whose
    seal digest the trial recorded as ``seal`` (missing, another's, unsealed or changed since
    it was saved), or None."""
    if not checkpoint or not (Path(checkpoint) / FILE_NAME).is_file():
        return NOT_KEPT
    if uid is None or recorded_owner(checkpoint) != (uid, number):
        return f"{checkpoint} is not recorded as this trial's"
    return seal_problem(Path(checkpoint), seal)


def seal_problem(folder: Path, expected: str | None) -> str | None:
    """Why the classifier in ``folder`` fails its seal (or has none), or is sealed with another
    digest than ``expected`` (the trial's, as it saved it): another model moved in; or None."""
    try:
        meta = json.loads((folder / FILE_NAME).read_text(encoding="utf-8"))
        found = read_classifier_file(meta).integrity.digest
        check_integrity(folder, meta, weights=True)
    except (OSError, ValueError, UsageError, InvalidClassifierFile) as exc:
        return f"{folder} fails its seal check: {exc}"
    if found != expected:
        return (
            f"{folder} holds another model than the trial saved there (seal {found[:12]}, "
            f"recorded {str(expected)[:12]}): copied or moved in from elsewhere"
        )
    return None


def link_checkpoint(reuse: Reuse, model: Path) -> str | None:
    """``reuse``'s checkpoint at ``model``, hard-linked file by file (copied where links
    cannot reach) and its seal checked there; None, or why it could not be placed (the run is
    then retrained)."""
    staged = model.with_name(model.name + STAGING)
    shutil.rmtree(staged, ignore_errors=True)
    try:
        shutil.copytree(reuse.checkpoint, staged, copy_function=_link_or_copy)
    except OSError as exc:  # deleted meanwhile (dropped out of the top-k), or unreadable
        shutil.rmtree(staged, ignore_errors=True)
        return f"trial {reuse.trial}'s checkpoint could not be linked: {exc}"
    if problem := seal_problem(staged, reuse.seal):
        shutil.rmtree(staged)
        return problem
    if model.is_symlink():
        model.unlink()
    else:
        shutil.rmtree(model, ignore_errors=True)  # a retraining's, cut short
    staged.rename(model)
    return None


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links not allowed there
        shutil.copy2(source, target)
