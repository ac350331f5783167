"""The folders a study writes to and deletes from never lie outside its output_dir; the one writer
of command outputs never destroys an input, a database or a device."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from hpo.outputs import (
    OutputRefused,
    OutsideOutputDir,
    TrialOutputs,
    atomic_text,
    refuse_unsafe_output,
)

UID = "0123456789abcdef" * 2


def outputs(output_dir: Path, name: str = "study") -> TrialOutputs:
    return TrialOutputs(output_dir, name, UID, keep_top_k=1, direction="maximize")


def someone_elses_checkpoint(folder: Path) -> Path:
    """A ``trial_1/checkpoint`` that is not the study's, as another run left it."""
    weights = folder / "trial_1" / "checkpoint" / "head.safetensors"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"not yours")
    return weights


@pytest.mark.parametrize("name", ["../elsewhere", "x/../../elsewhere", "{tmp}/elsewhere"])
def test_a_name_that_leads_out_of_output_dir_is_refused_and_deletes_nothing(tmp_path, name):
    (tmp_path / "out").mkdir()
    weights = someone_elses_checkpoint(tmp_path / f"elsewhere-{UID[:8]}")  # where the name leads
    with pytest.raises(OutsideOutputDir, match="outside output_dir") as caught:
        outputs(tmp_path / "out", name.format(tmp=tmp_path)).remove_checkpoint(1)
    assert "\n" not in str(caught.value)
    assert weights.exists()


def test_a_study_folder_symlinked_out_of_output_dir_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / f"study-{UID[:8]}").symlink_to(
        tmp_path / "outside", target_is_directory=True
    )
    with pytest.raises(OutsideOutputDir):
        outputs(tmp_path / "out")


def test_a_trial_folder_symlinked_out_of_output_dir_is_never_deleted_from(tmp_path):
    weights = someone_elses_checkpoint(tmp_path / "outside")
    study = outputs(tmp_path / "out")
    study.study_dir.mkdir(parents=True)
    (study.study_dir / "trial_1").symlink_to(weights.parent.parent, target_is_directory=True)
    with pytest.raises(OutsideOutputDir):
        study.remove_checkpoint(1)
    with pytest.raises(OutsideOutputDir):
        study.write_metrics(1, {"value": 0.5})
    assert weights.exists()


def test_trial_and_checkpoint_folders_lie_inside_the_study_folder(tmp_path):
    study = outputs(tmp_path / "out")
    assert study.trial_dir(3) == tmp_path / "out" / f"study-{UID[:8]}" / "trial_3"
    assert study.checkpoint_dir(3) == study.trial_dir(3) / "checkpoint"


def test_a_kept_checkpoint_is_named_by_a_reference_not_copied(tmp_path):
    study = outputs(tmp_path / "out")
    folder = study.checkpoint_dir(2)
    (folder / "encoder").mkdir(parents=True)
    (folder / "head.safetensors").write_bytes(b"h" * 300)
    (folder / "encoder" / "model.safetensors").write_bytes(b"e" * 5000)
    reference = study.describe_checkpoint(2)
    assert reference.parent == study.trial_dir(2) and reference.stat().st_size < 1000
    assert json.loads(reference.read_text()) == {
        "checkpoint": str(folder.resolve()),
        "bytes": 5300,
        "files": {"encoder/model.safetensors": 5000, "head.safetensors": 300},
        "predict": f"hpo predict {folder.resolve()} --input posts.csv --out predictions.csv",
    }
    assert sorted(p.name for p in study.trial_dir(2).iterdir()) == ["checkpoint", "checkpoint.json"]
    study.remove_checkpoint(2)
    assert not any(study.trial_dir(2).iterdir()), "the checkpoint goes with its reference"


def test_metrics_name_the_study_and_trial_they_belong_to(tmp_path):
    # the owner is not the caller's to set
    path = outputs(tmp_path / "out").write_metrics(3, {"value": 0.5, "trial": 7})
    assert json.loads(path.read_text()) == {"value": 0.5, "study_uid": UID, "trial": 3}


def test_atomic_text_appears_whole_or_not_at_all(tmp_path):
    from hpo.outputs import atomic_text

    target = tmp_path / "predictions.csv"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt), atomic_text(target) as stream:
        stream.write("half")
        raise KeyboardInterrupt
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == [
        "predictions.csv"
    ]
    with atomic_text(target) as stream:
        stream.write("new\n")
    assert target.read_text() == "new\n" and [p.name for p in tmp_path.iterdir()] == [
        "predictions.csv"
    ]
    umask = os.umask(0)
    os.umask(umask)
    # as any new file, not mkstemp's private 0600
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def sqlite_database(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE studies (name TEXT)")
        db.execute("INSERT INTO studies VALUES ('kept')")
    return path


def still_holds_its_rows(path: Path) -> bool:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT name FROM studies").fetchall() == [("kept",)]


def test_atomic_text_writes_straight_into_a_fifo_and_leaves_it_a_fifo(tmp_path):
    """Renaming over a FIFO would replace it with a file its reader never sees."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()), daemon=True)
    reader.start()
    with atomic_text(fifo) as stream:
        stream.write("post_id,text\n")
    reader.join(10)
    assert read == ["post_id,text\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_atomic_text_writes_into_a_character_device_and_leaves_it_a_device(tmp_path):
    """A node of /dev/null's own device: as root, the rename turned /dev/null into a regular
    file."""
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        null.open("w").close()
    except OSError:
        pytest.skip("making and opening a device node needs root with CAP_MKNOD")
    with atomic_text(null) as stream:
        stream.write("post_id,text\n")
    assert stat.S_ISCHR(null.stat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["null"]


def test_atomic_text_through_a_symlink_replaces_the_target_and_keeps_the_link(tmp_path):
    target, link = tmp_path / "predictions.csv", tmp_path / "latest.csv"
    target.write_text("old\n")
    link.symlink_to(target)
    with atomic_text(link) as stream:
        stream.write("new\n")
    assert link.is_symlink() and target.read_text() == "new\n"


@pytest.mark.parametrize("kind", ["database", "its journal", "a folder"])
def test_atomic_text_never_replaces_a_database_or_a_folder(tmp_path, kind):
    database = sqlite_database(tmp_path / "hpo.db")
    journal = tmp_path / "hpo.db-wal"
    journal.write_bytes(b"wal frames")
    (tmp_path / "folder").mkdir()
    out, message = {
        "database": (database, "SQLite database"),
        "its journal": (journal, "SQLite database"),
        "a folder": (tmp_path / "folder", "is a folder"),
    }[kind]
    with pytest.raises(OutputRefused, match=message), atomic_text(out) as stream:
        stream.write("number,value\n")
    assert still_holds_its_rows(database) and journal.read_bytes() == b"wal frames"
    assert (tmp_path / "folder").is_dir() and not [
        p for p in tmp_path.iterdir() if p.name.startswith(".")
    ]


def test_a_protected_path_is_refused_however_it_is_reached(tmp_path):
    posts = tmp_path / "posts.csv"
    posts.write_text("post_id,text\n1,hello\n")
    (tmp_path / "link.csv").symlink_to(posts)
    os.link(posts, tmp_path / "hard.csv")
    model = tmp_path / "model"
    model.mkdir()
    rules = {"protected": {posts: "the --input file", model: "the model folder"}}
    for out, message in (
        (posts, "is the --input file"),
        (tmp_path / "link.csv", "is the --input file"),
        (tmp_path / "hard.csv", "is the --input file"),
        (model / "predictions.csv", "lies inside the model folder"),
    ):
        with pytest.raises(OutputRefused, match=message):
            refuse_unsafe_output(out, **rules, force=True)  # --force never reaches an input
    assert posts.read_text() == "post_id,text\n1,hello\n"


def test_an_existing_file_the_command_did_not_write_needs_force(tmp_path):
    notes, empty = tmp_path / "notes.csv", tmp_path / "empty.csv"
    notes.write_text("mine\n")
    empty.touch()
    rules = {"may_replace": lambda path: False, "kind": "predictions file"}
    with pytest.raises(OutputRefused, match="not a predictions file.*--force"):
        refuse_unsafe_output(notes, **rules)
    refuse_unsafe_output(notes, **rules, force=True)
    refuse_unsafe_output(empty, **rules)  # an empty file holds nothing to lose
    with pytest.raises(OutputRefused, match="SQLite database"):  # not even with --force
        refuse_unsafe_output(sqlite_database(tmp_path / "s.db"), **rules, force=True)
