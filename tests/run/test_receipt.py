"""A passed preflight's receipt (hpo.run.receipt), named by a digest of what the checks read: the
same inputs find the same receipt, the study's name and budget are no input, a data file edited
to the same size is another input, and an encoder from the hub or no cache gives no receipt."""

from __future__ import annotations

from pathlib import Path

from hpo.run.receipt import FOLDER, receipt_path, write_receipt
from hpo.spec import StudySpec


def study(tmp_path: Path, encoder: str | None = None, **fields) -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": "receipt",
            "task": "criteria",
            "data_dir": str(tmp_path / "data"),
            "n_trials": 4,
            "model_paths": {"enc": encoder or str(tmp_path / "enc")},
            "train": {"encoder": "enc", "cache_dir": str(tmp_path / "cache")},
            "search_space": {"learning_rate": {"type": "float", "low": 1.0e-5, "high": 1.0e-3}},
            **fields,
        }
    )


def receipt(spec: StudySpec) -> Path | None:
    return receipt_path(spec, [spec.train_config({"learning_rate": 1.0e-4}, None)])


def test_the_same_inputs_find_the_same_receipt_and_an_edited_file_another(tmp_path):
    (tmp_path / "enc").mkdir()
    (tmp_path / "enc" / "config.json").write_text("{}")
    (tmp_path / "data").mkdir()
    posts = tmp_path / "data" / "posts.csv"
    posts.write_text("post_id,text\n1,alpha\n")
    first = receipt(study(tmp_path))
    assert first is not None and first.parent == tmp_path / "cache" / FOLDER
    assert first.suffix == ".passed" and not first.exists()
    assert receipt(study(tmp_path)) == first
    assert receipt(study(tmp_path, name="renamed", n_trials=40)) == first  # not read by the checks
    posts.write_text("post_id,text\n1,omega\n")  # the same size, another content
    assert receipt(study(tmp_path)) not in (None, first)
    write_receipt(first)
    assert first.exists()
    write_receipt(None)  # no receipt to write: nothing happens


def test_an_encoder_from_the_hub_gives_no_receipt(tmp_path):
    (tmp_path / "data").mkdir()
    assert receipt(study(tmp_path, encoder="org/hub-model")) is None
