"""Files a study leaves on disk: ``<output_dir>/<study>-<uid8>/trial_<n>/`` with the trial's
log, metrics and (for the top-k trials only) its checkpoint."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from hpo.errors import UsageError

UID_DIGITS = 8  # of the study's uid in its folder name: plenty to tell a few studies of one name apart


@contextmanager
def atomic_text(path: str | Path) -> Iterator[TextIO]:
    """A text file that appears at ``path`` whole or not at all: written beside it (same
    filesystem, so the rename is atomic) and renamed over it only when the block succeeds."""
    path = Path(path)
    fd, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 would make the result private
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as stream:
            yield stream
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


class OutsideOutputDir(UsageError):
    """A study or trial folder that would lie outside output_dir (a name with '..', or a symlink)."""


def study_dir(output_dir: str | Path, name: str, uid: str) -> Path:
    """``<output_dir>/<name>-<uid8>``: keyed by the study's uid as well as its name, so two
    studies of one name (on two storages, or deleted and re-created) never share trial folders."""
    return Path(output_dir) / f"{name}-{uid[:UID_DIGITS]}"


def recorded_owner(checkpoint: str | Path) -> tuple[str | None, int | None]:
    """The (study uid, trial number) that the metrics.json beside ``checkpoint`` names;
    (None, None) where there is none to read (a checkpoint from before uids, or moved)."""
    try:
        recorded = json.loads((Path(checkpoint).parent / "metrics.json").read_text())
    except (OSError, ValueError):
        return None, None
    if not isinstance(recorded, dict):
        return None, None
    return recorded.get("study_uid"), recorded.get("trial")


class TrialOutputs:
    def __init__(self, output_dir: str | Path, name: str, uid: str, keep_top_k: int, direction: str):
        self.output_dir, self.uid = Path(output_dir), uid
        self.study_dir = self._confined(study_dir(output_dir, name, uid))
        self.keep_top_k, self.direction = keep_top_k, direction

    def _confined(self, path: Path) -> Path:
        """``path``, once it is known to resolve strictly inside output_dir.

        Defence in depth behind the spec's name check: folders here get written to and
        deleted, so one that leads out (``..``, a symlink) must never be used.
        """
        if self.output_dir.resolve() not in path.resolve().parents:
            raise OutsideOutputDir(f"{path} resolves to {path.resolve()}, outside output_dir {self.output_dir}; "
                                   "give the study a plain name and remove any symlink that leads out")
        return path

    def trial_dir(self, number: int) -> Path:
        return self._confined(self.study_dir / f"trial_{number}")

    @contextmanager
    def trial_log(self, number: int) -> Iterator[Path]:
        """Everything the package logs during the trial also goes to ``trial_<n>/train.log``."""
        path = self.trial_dir(number) / "train.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("hpo")
        logger.addHandler(handler)
        try:
            yield path
        finally:
            logger.removeHandler(handler)
            handler.close()

    def write_metrics(self, number: int, data: dict) -> Path:
        """``metrics.json``, naming the study and trial it belongs to (``hpo best`` checks them)."""
        path = self.trial_dir(number) / "metrics.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        owner = {"study_uid": self.uid, "trial": number}
        path.write_text(json.dumps({**data, **owner}, indent=2, sort_keys=True) + "\n")
        return path

    def ranked_keep(self, candidates: Sequence[tuple[int, float]]) -> set[int]:
        """Trial numbers whose checkpoints stay: the best ``keep_top_k`` values, earlier
        trials first on ties."""
        best_first = sorted(candidates, key=lambda c: (-c[1] if self.direction == "maximize" else c[1], c[0]))
        return {number for number, _ in best_first[: self.keep_top_k]}

    def checkpoint_dir(self, number: int) -> Path:
        return self._confined(self.trial_dir(number) / "checkpoint")

    def archive_checkpoint(self, number: int) -> Path:
        """One uncompressed tar (safetensors do not compress) for the artifact store."""
        archive = self.trial_dir(number) / "checkpoint.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(self.checkpoint_dir(number), arcname="checkpoint")
        return archive

    def remove_checkpoint(self, number: int) -> None:
        shutil.rmtree(self.checkpoint_dir(number), ignore_errors=True)
        (self.trial_dir(number) / "checkpoint.tar").unlink(missing_ok=True)
