"""The folders a study writes to and deletes from never lie outside its output_dir."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpo.outputs import OutsideOutputDir, TrialOutputs

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
    (tmp_path / "out" / f"study-{UID[:8]}").symlink_to(tmp_path / "outside", target_is_directory=True)
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


def test_metrics_name_the_study_and_trial_they_belong_to(tmp_path):
    path = outputs(tmp_path / "out").write_metrics(3, {"value": 0.5, "trial": 7})  # the owner is not the caller's to set
    assert json.loads(path.read_text()) == {"value": 0.5, "study_uid": UID, "trial": 3}


def test_atomic_text_appears_whole_or_not_at_all(tmp_path):
    from hpo.outputs import atomic_text

    target = tmp_path / "predictions.csv"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt), atomic_text(target) as stream:
        stream.write("half")
        raise KeyboardInterrupt
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["predictions.csv"]
    with atomic_text(target) as stream:
        stream.write("new\n")
    assert target.read_text() == "new\n" and [p.name for p in tmp_path.iterdir()] == ["predictions.csv"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # as any new file, not mkstemp's private 0600
