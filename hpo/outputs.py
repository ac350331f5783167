"""Files a study leaves on disk: ``<output_dir>/<study>-<uid8>/trial_<n>/`` with the trial's
log, metrics and (for the top-k trials only) its checkpoint and a reference to it; and the one
writer every command's output goes through, which never destroys an input, a database or a
device."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TextIO

from hpo.errors import UsageError

# of the study's uid in its folder name: plenty to tell a few studies of one name apart
UID_DIGITS = 8
CHECKPOINT_REFERENCE = "checkpoint.json"  # beside a kept checkpoint: the artifact naming it


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database
SQLITE_SIDE_FILES = (
    "-wal",
    "-shm",
    "-journal",
)  # a database's own files beside it: losing one corrupts it


class OutputRefused(UsageError):
    """Writing there would destroy what is not the command's to replace: an input, a database, a
    device."""


def refuse_unsafe_output(
    path: str | Path,
    *,
    protected: Mapping[str | Path, str] | None = None,
    may_replace: Callable[[Path], bool] | None = None,
    kind: str = "file this command wrote",
    force: bool = False,
    suffix: tuple[str, str] | None = None,
) -> None:
    """Raise ``OutputRefused`` unless a command may write ``path``: never a ``protected`` path
    ({path: what it is}: an input file, or anything inside a model folder), however it is reached
    (symlink, hard link), not even with ``force``; never a SQLite database (a study's storage), a
    folder, a block device or a socket; an existing non-empty file that ``may_replace`` does not
    recognise as a ``kind`` only with ``force``. Nothing, a regular file, a character device
    (/dev/null, a terminal) or a FIFO is writable; a file's name ends in ``suffix`` (the ending,
    what is written), which whoever opens it goes by."""
    path = Path(path)
    try:
        status = path.stat()  # through symlinks: what the write would reach
    except FileNotFoundError:
        status = None
    except OSError:
        return  # unreadable here: the write fails with its own reason
    target = path.resolve()
    for guarded, what in (protected or {}).items():
        guarded = Path(guarded)
        if target == guarded.resolve() or (
            status is not None and guarded.exists() and os.path.samefile(guarded, path)
        ):
            raise OutputRefused(
                f"refusing to write {path}: it is {what}, which would be destroyed; "
                "choose another output path"
            )
        if guarded.resolve() in target.parents:
            raise OutputRefused(
                f"refusing to write {path}: it lies inside {what} ({guarded}); choose an output "
                "path outside it"
            )
    if _is_sqlite(target):
        raise OutputRefused(
            f"refusing to overwrite {path}: it is a SQLite database (a study's storage?), which "
            "would be destroyed; choose another output path"
        )
    if status is None:
        _refuse_misnamed(path, suffix)
        return
    if stat.S_ISCHR(status.st_mode) or stat.S_ISFIFO(status.st_mode):  # a stream: no name to go by
        return
    if stat.S_ISDIR(status.st_mode):
        raise OutputRefused(f"cannot write {path}: it is a folder; give a file path inside it")
    if not stat.S_ISREG(status.st_mode):
        raise OutputRefused(
            f"refusing to write {path}: it is a block device or socket, not a file; "
            "choose a file path"
        )
    _refuse_misnamed(path, suffix)
    if status.st_size and may_replace is not None and not force and not may_replace(target):
        raise OutputRefused(
            f"refusing to overwrite {path}: it exists and is not a {kind}; choose a new path, "
            "or pass --force to replace it"
        )


def _refuse_misnamed(path: Path, suffix: tuple[str, str] | None) -> None:
    if suffix is not None and path.suffix.lower() != suffix[0]:
        raise OutputRefused(f"--out {path}: {suffix[1]}; name it {suffix[0]}")


def _is_sqlite(path: Path) -> bool:
    """``path`` is a SQLite database, or the journal beside one."""
    for suffix in SQLITE_SIDE_FILES:
        if path.name.endswith(suffix) and path.name != suffix:
            path = path.with_name(path.name[: -len(suffix)])
            break
    if not path.is_file():  # opening a FIFO to look would block until something writes to it
        return False
    try:
        with path.open("rb") as stream:
            return stream.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:  # unreadable: then not ours to judge
        return False


@contextmanager
def atomic_text(path: str | Path, **rules) -> Iterator[TextIO]:
    """A UTF-8 text file that appears at ``path`` whole or not at all; ``rules`` as
    ``refuse_unsafe_output`` (checked first)."""
    with _atomic(Path(path), "w", rules) as stream:
        yield stream


def write_json(path: Path, data) -> None:
    """``data`` as indented JSON at ``path``, its folder made: whole or not at all, so a kill
    mid-write leaves no half-written file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_text(path) as stream:
        stream.write(json.dumps(data, indent=2, default=str) + "\n")


@contextmanager
def atomic_bytes(path: str | Path, **rules) -> Iterator[BinaryIO]:
    """``atomic_text`` for binary content (images)."""
    with _atomic(Path(path), "wb", rules) as stream:
        yield stream


@contextmanager
def _atomic(path: Path, mode: str, rules: dict) -> Iterator:
    """Written beside the real target (same filesystem, so the rename is atomic) and renamed
    over it only when the block succeeds. A character device or a FIFO is written straight
    into: a rename would replace the device (/dev/null) with a regular file."""
    refuse_unsafe_output(path, **rules)
    text = {"newline": "", "encoding": "utf-8"} if "b" not in mode else {}
    if (
        path.exists() and not path.is_file()
    ):  # what refuse_unsafe_output lets through: a device or a FIFO
        with open(path, mode, **text) as stream:
            yield stream
        return
    real = Path(os.path.realpath(path))  # through a symlink: the link stays, its target is replaced
    fd, staging = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, default_file_mode())  # mkstemp's 0600 would make the result private
        with os.fdopen(fd, mode, **text) as stream:
            yield stream
        os.replace(staging, real)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def default_file_mode() -> int:
    """The mode ``open()`` gives a new file: 0666 less the umask."""
    umask = os.umask(0)  # the only way to read it portably; set back at once
    os.umask(umask)
    return 0o666 & ~umask


def share_files(folder: str | Path) -> None:
    """Every file under ``folder`` gets ``default_file_mode()``, as text outputs do: safetensors'
    ``save_file`` (and so ``save_pretrained``) writes weights 0600 whatever the umask, and
    others sharing an output_dir could not load the model."""
    mode = default_file_mode()
    for path in Path(folder).rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(mode)


class OutsideOutputDir(UsageError):
    """A study or trial folder that would lie outside output_dir (a name with '..', or a
    symlink)."""


LEADS_OUT = "give the study a plain name and remove any symlink that leads out"


def lies_inside(path: str | Path, root: str | Path) -> bool:
    """``path`` resolves (symlinks followed) strictly inside ``root``."""
    return Path(root).resolve() in Path(path).resolve().parents


def confined(path: str | Path, output_dir: str | Path, fix: str = LEADS_OUT) -> Path:
    """``path``, once it is known to resolve strictly inside ``output_dir``; else
    ``OutsideOutputDir`` naming where it leads and ``fix``.

    Defence in depth behind the spec's name check: folders there get written to and deleted,
    so one that leads out (``..``, a symlink) must never be used.
    """
    path = Path(path)
    if not lies_inside(path, output_dir):
        raise OutsideOutputDir(
            f"{path} resolves to {path.resolve()}, outside output_dir {output_dir}; {fix}"
        )
    return path


def confined_tree(folder: str | Path, output_dir: str | Path, fix: str = LEADS_OUT) -> None:
    """``folder`` and everything under it (links not followed, each link checked where it
    leads) resolve inside ``output_dir``: a command that writes and deletes there reaches
    nothing else. A folder that does not exist yet passes where its own path does."""
    confined(folder, output_dir, fix)
    for parent, folders, files in os.walk(folder):
        for name in (*folders, *files):
            confined(Path(parent) / name, output_dir, fix)


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
    def __init__(
        self, output_dir: str | Path, name: str, uid: str, keep_top_k: int, direction: str
    ):
        self.output_dir, self.uid = Path(output_dir), uid
        self.study_dir = self._confined(study_dir(output_dir, name, uid))
        self.keep_top_k, self.direction = keep_top_k, direction

    def _confined(self, path: Path) -> Path:
        return confined(path, self.output_dir)

    def trial_dir(self, number: int) -> Path:
        return self._confined(self.study_dir / f"trial_{number}")

    @contextmanager
    def trial_log(self, number: int) -> Iterator[Path]:
        """Everything the package logs during the trial also goes to ``trial_<n>/train.log``."""
        path = self.trial_dir(number) / "train.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        loggers = [
            logging.getLogger("hpo"),
            logging.getLogger("hpo.detail"),
        ]  # detail: the log file only
        for logger in loggers:
            logger.addHandler(handler)
        try:
            yield path
        finally:
            for logger in loggers:
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
        best_first = sorted(
            candidates, key=lambda c: (-c[1] if self.direction == "maximize" else c[1], c[0])
        )
        return {number for number, _ in best_first[: self.keep_top_k]}

    def checkpoint_dir(self, number: int) -> Path:
        return self._confined(self.trial_dir(number) / "checkpoint")

    def describe_checkpoint(self, number: int) -> Path:
        """``checkpoint.json`` beside the checkpoint: where it is, its files and their sizes,
        and how to predict with it. The artifact store gets this reference, not a copy: the
        folder is the checkpoint's one copy on disk (a tar of it in the store was two more)."""
        folder = self.checkpoint_dir(number)
        files = {
            path.relative_to(folder).as_posix(): path.stat().st_size
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        }
        path = self.trial_dir(number) / CHECKPOINT_REFERENCE
        reference = {
            "checkpoint": str(folder.resolve()),
            "bytes": sum(files.values()),
            "files": files,
            "predict": f"hpo predict {folder.resolve()} --input posts.csv --out predictions.csv",
        }
        path.write_text(json.dumps(reference, indent=2) + "\n")
        return path

    def remove_checkpoint(self, number: int) -> None:
        shutil.rmtree(self.checkpoint_dir(number), ignore_errors=True)
        (self.trial_dir(number) / CHECKPOINT_REFERENCE).unlink(missing_ok=True)
        # what earlier versions uploaded: a second copy of the checkpoint
        (self.trial_dir(number) / "checkpoint.tar").unlink(missing_ok=True)
