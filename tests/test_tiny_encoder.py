"""``hpo make-tiny-encoder``: a folder that already holds something is replaced only with --force,
and then wholly: a RoBERTa written over a DeBERTa used to leave a mixed folder of both."""

from __future__ import annotations

import os

from hpo.cli import main
from hpo.fixtures import make_tiny_encoder
from hpo.models.loading import load_pretrained
from hpo.models.tokenizer import load_tokenizer


def contents(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_folder_that_holds_a_model_is_replaced_only_with_force(tmp_path, capsys):
    out = tmp_path / "encoder"
    assert main(["make-tiny-encoder", str(out), "--arch", "deberta-v2"]) == 0
    deberta = contents(out)
    assert main(["make-tiny-encoder", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not empty" in err and "--force" in err, err
    assert contents(out) == deberta
    assert main(["make-tiny-encoder", str(out), "--force"]) == 0
    roberta = make_tiny_encoder("roberta", tmp_path / "fresh")
    assert sorted(os.listdir(out)) == sorted(os.listdir(roberta)), "nothing of the DeBERTa is left"
    assert load_pretrained(out).config.model_type == "roberta" and len(load_tokenizer(out)) > 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], (
        "no staging folder left"
    )


def test_an_empty_folder_is_filled_and_force_never_replaces_the_working_folder(
    tmp_path, monkeypatch, capsys
):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert make_tiny_encoder("roberta", empty) == empty and (empty / "config.json").is_file()
    monkeypatch.chdir(empty)
    assert main(["make-tiny-encoder", ".", "--force"]) == 2
    assert "the current folder" in capsys.readouterr().err
    assert (empty / "config.json").is_file()
