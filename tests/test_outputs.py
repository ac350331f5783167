"""The folders a study writes to and deletes from never lie outside its output_dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpo.outputs import OutsideOutputDir, TrialOutputs


def outputs(output_dir: Path, name: str = "study") -> TrialOutputs:
    return TrialOutputs(output_dir, name, keep_top_k=1, direction="maximize")


def someone_elses_checkpoint(folder: Path) -> Path:
    """A ``trial_1/checkpoint`` that is not the study's, as another run left it."""
    weights = folder / "trial_1" / "checkpoint" / "head.safetensors"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"not yours")
    return weights


@pytest.mark.parametrize("name", ["..", ".", "../elsewhere", "x/../../elsewhere"])
def test_a_name_that_leads_out_of_output_dir_is_refused_and_deletes_nothing(tmp_path, name):
    weights = someone_elses_checkpoint(tmp_path)
    someone_elses_checkpoint(tmp_path / "elsewhere")
    with pytest.raises(OutsideOutputDir, match="outside output_dir") as caught:
        outputs(tmp_path / "out", name).remove_checkpoint(1)
    assert "\n" not in str(caught.value)
    assert weights.exists() and (tmp_path / "elsewhere" / "trial_1" / "checkpoint").exists()


def test_a_study_folder_symlinked_out_of_output_dir_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "study").symlink_to(tmp_path / "outside", target_is_directory=True)
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
    assert study.trial_dir(3) == tmp_path / "out" / "study" / "trial_3"
    assert study.checkpoint_dir(3) == study.trial_dir(3) / "checkpoint"
    assert study.write_metrics(3, {"value": 0.5}).read_text().strip().startswith("{")
