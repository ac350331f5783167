"""Predictions from a saved model: the Python API, the CLI and the training code give the same
numbers for every formulation (long posts in chunks included), and bad input is one line,
exit 2, with nothing left at --out."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from hpo.cli import main
from hpo.data import (
    SYMPTOMS,
    load_descriptions,
    load_redsm5,
    partition,
    split_posts,
    symptom_profiles,
)
from hpo.data.collate import Collator
from hpo.data.tokenize import tokenize_pairs
from hpo.fixtures import write_sample
from hpo.models.classifier import load_classifier as load_model
from hpo.models.device import forward_keys
from hpo.models.ensemble_file import ENSEMBLE_FILE, write_ensemble
from hpo.models.inference import InvalidClassifierFile
from hpo.predict import load_classifier, read_settings
from hpo.train.config import TrainConfig
from hpo.train.evaluate import post_matrix, split_probabilities
from hpo.train.formulations import build_examples
from hpo.train.loop import train
from hpo.train.prepare import prepare_data

CPU = torch.device("cpu")
FORMULATIONS = {  # tiny settings where some sample posts need several chunks
    "multilabel": dict(
        task="criteria",
        criteria_formulation="multilabel",
        long_text="chunks",
        max_length=40,
        threshold="tuned",
        objective_metric="post_macro_f1",
    ),
    "pairs": dict(task="criteria", criteria_formulation="pairs", long_text="chunks", max_length=96),
    "evidence": dict(task="evidence", max_length=64, evidence_scope="positive_criteria"),
}


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory) -> Path:
    return write_sample(tmp_path_factory.mktemp("sample"), posts=60, seed=3)


@pytest.fixture(scope="module")
def trained(tiny_roberta, sample_dir, tmp_path_factory):
    """formulation -> (config, model folder), each trained once (one epoch) on first use."""
    cache: dict[str, tuple[TrainConfig, Path]] = {}

    def get(formulation: str) -> tuple[TrainConfig, Path]:
        if formulation not in cache:
            folder = tmp_path_factory.mktemp(formulation) / "checkpoint"
            config = TrainConfig(
                encoder=str(tiny_roberta),
                data_dir=str(sample_dir),
                epochs=1,
                learning_rate=3e-3,
                batch_size=16,
                seed=0,
                pooling="mean",
                mixed_precision="no",
                device="cpu",
                checkpoint_dir=str(folder),
                **FORMULATIONS[formulation],
            )
            train(config)
            cache[formulation] = config, folder
        return cache[formulation]

    return get


def validation_posts(
    config: TrainConfig, sample_dir: Path, folder: Path
) -> tuple[Path, list[str], list[str]]:
    """The validation split's posts as a predict input file, their ids and texts."""
    posts = load_redsm5(sample_dir).posts
    ids = list(dict.fromkeys(prepare_data(config).validation.post_ids))
    path = folder / "posts.csv"
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["post_id", "text"])
        writer.writerows([post_id, posts[post_id].text] for post_id in ids)
    return path, ids, [posts[post_id].text for post_id in ids]


def predict_process(
    model: Path, input_path: Path, out: Path, *extra: str
) -> subprocess.CompletedProcess:
    """``hpo predict`` as its own process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "hpo", "predict", str(model), "--input", str(input_path)]
        + ["--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_cli(model: Path, input_path: Path, out: Path, *extra: str) -> list[dict[str, str]]:
    assert (
        main(
            [
                "predict",
                str(model),
                "--input",
                str(input_path),
                "--out",
                str(out),
                "--no-progress",
                *extra,
            ]
        )
        == 0
    )
    assert b"\r\n" not in out.read_bytes(), "lines end in \\n, as the inputs and exports do"
    with out.open(newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def training_scores(config: TrainConfig, model_dir: Path) -> tuple[object, np.ndarray]:
    """What the training code scores the validation split with this checkpoint."""
    split = prepare_data(config).validation
    model, tokenizer = load_model(model_dir)
    collate = Collator(tokenizer.pad_token_id, keep_keys=forward_keys(model))
    return split, split_probabilities(model, split.tokens, collate, 64, CPU)


def cli_matrix(rows: list[dict[str, str]], ids: list[str]) -> np.ndarray:
    by_id = {row["post_id"]: row for row in rows}
    return np.array(
        [[float(by_id[post_id][f"{symptom}_prob"]) for symptom in SYMPTOMS] for post_id in ids]
    )


@pytest.mark.parametrize("formulation", ["multilabel", "pairs"])
@pytest.mark.slow
def test_criteria_cli_equals_the_api_and_the_training_code(
    trained, sample_dir, tmp_path, monkeypatch, formulation
):
    config, model_dir = trained(formulation)
    input_path, ids, texts = validation_posts(config, sample_dir, tmp_path)
    rows = run_cli(model_dir, input_path, tmp_path / "predictions.csv")
    assert [row["post_id"] for row in rows] == ids  # one row per post, in input order
    from_cli = cli_matrix(rows, ids)

    steps = []
    monkeypatch.setattr("hpo.predict._model.BLOCK_BATCHES", 1)
    api = load_classifier(model_dir, device="cpu").predict(
        texts, batch_size=3, progress=steps.append
    )
    # several blocks of other batches, same numbers
    assert len(steps) > 1 and sum(steps) == len(texts)
    np.testing.assert_allclose(api.probabilities, from_cli, rtol=1e-5, atol=1e-6)
    decided = np.array([[int(row[symptom]) for symptom in SYMPTOMS] for row in rows], dtype=bool)
    saved = json.loads((model_dir / "classifier.json").read_text())["inference"]["thresholds"]
    thresholds = np.array([saved[s] for s in SYMPTOMS])
    # a probability within the tolerance above of its threshold may fall on either side of it
    clear = np.abs(from_cli - thresholds) > 1e-5
    assert clear.mean() > 0.5 and (api.decisions == decided)[clear].all()
    assert (api.decisions == (api.probabilities >= thresholds)).all()

    split, probs = training_scores(config, model_dir)
    if formulation == "multilabel":
        assert (np.diff(split.tokens.offsets) > 1).any(), (
            "some validation posts are read in several chunks"
        )
    np.testing.assert_allclose(from_cli, post_matrix(split, probs)[1], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_evidence_cli_equals_the_api_and_the_training_code(trained, sample_dir, tmp_path):
    config, model_dir = trained("evidence")
    input_path, ids, texts = validation_posts(config, sample_dir, tmp_path)
    rows = run_cli(model_dir, input_path, tmp_path / "top.csv", "--top-k", "2")
    api = load_classifier(model_dir, device="cpu").predict_evidence(texts, top_k=2, batch_size=4)
    expected = [
        (post_id, symptom, s.rank, s.text, s.score)
        for post_id, top in zip(ids, api, strict=True)
        for symptom, sentences in top.items()
        for s in sentences
    ]
    assert [(r["post_id"], r["symptom"], int(r["rank"]), r["sentence"]) for r in rows] == [
        e[:4] for e in expected
    ]
    np.testing.assert_allclose(
        [float(r["score"]) for r in rows], [e[4] for e in expected], rtol=1e-5, atol=1e-6
    )
    assert all(len(top[symptom]) <= 2 for top in api for symptom in SYMPTOMS)

    every = run_cli(model_dir, input_path, tmp_path / "all.csv", "--top-k", "0")
    scored = defaultdict(list)
    for row in every:
        scored[row["post_id"], row["symptom"]].append((row["sentence"], float(row["score"])))
    split, probs = training_scores(config, model_dir)
    trained_scores = defaultdict(list)
    for example, prob in zip(_evidence_examples(config), probs[:, 0], strict=True):
        trained_scores[example.post_id, example.criterion].append((example.text_b, float(prob)))
    assert trained_scores, "the validation split has evidence examples"
    for (
        key,
        expected_scores,
    ) in trained_scores.items():  # training paired each post with its shown criteria only
        got = sorted(scored[key])
        want = sorted(expected_scores)
        assert [text for text, _ in got] == [text for text, _ in want], key
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-5, atol=1e-6)


def _evidence_examples(config: TrainConfig):
    """The validation split's evidence examples, in the order prepare_data tokenizes them."""
    corpus = load_redsm5(config.data_dir)
    examples = build_examples(
        corpus, "evidence", load_descriptions(), evidence_scope=config.evidence_scope
    )
    posts = split_posts(symptom_profiles(corpus), config.split_fractions, seed=config.split_seed)
    return partition(examples, posts).validation


def test_a_long_post_is_read_in_chunks_and_max_pooled_as_in_training(trained):
    config, model_dir = trained("multilabel")
    predictor = load_classifier(model_dir, device="cpu")
    long_post = " ".join(
        ["I used to love painting but now nothing interests me at all."] * 6
        + ["I cannot sleep more than three hours a night."]
    )
    tokens = tokenize_pairs(
        predictor.tokenizer,
        [(None, long_post)],
        [0],
        config.max_length,
        cache_key=None,
        long_text="chunks",
    )
    assert len(tokens.input_ids) > 2 and tokens.coverage == 1.0  # several windows, every token seen
    with torch.inference_mode():
        per_chunk = torch.stack(
            [
                torch.sigmoid(predictor.model(torch.as_tensor(ids[None], dtype=torch.long)))[0]
                for ids in tokens.input_ids
            ]
        )
    got = predictor.predict([long_post, "short"]).probabilities[0]
    np.testing.assert_allclose(got, per_chunk.amax(0).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_the_real_command_line_prints_a_throughput_line(trained, sample_dir, tmp_path):
    config, model_dir = trained("multilabel")
    input_path = tmp_path / "posts.jsonl"
    input_path.write_text(
        '{"post_id": 1, "text": "I feel empty every day."}\n\n'
        '{"post_id": "b", "text": "Slept well, went for a run."}\n',
        encoding="utf-8",
    )
    out = tmp_path / "predictions.csv"
    result = predict_process(model_dir, input_path, out)
    assert result.returncode == 0, result.stderr
    assert "posts/s" in result.stderr.strip().splitlines()[-1]
    with out.open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert [row["post_id"] for row in rows] == ["1", "b"]
    expected = (
        load_classifier(model_dir, device="cpu")
        .predict(
            [
                row["text"]
                for row in (
                    {"text": "I feel empty every day."},
                    {"text": "Slept well, went for a run."},
                )
            ]
        )
        .probabilities
    )
    np.testing.assert_allclose(cli_matrix(rows, ["1", "b"]), expected, rtol=1e-5, atol=1e-6)


BAD_INPUTS = {
    "missing column": ("posts.csv", b"post_id,body\n1,hello\n", "missing column(s) text"),
    "empty csv": ("posts.csv", b"", "file is empty"),
    "header only": ("posts.csv", b"post_id,text\n", "no data rows"),
    "empty jsonl": ("posts.jsonl", b"\n\n", "file is empty"),
    "not utf-8": (
        "posts.csv",
        "post_id,text\n1,caf\u00e9 tr\u00e8s triste\n".encode("latin-1"),
        "not valid UTF-8",
    ),
    "bad json": (
        "posts.jsonl",
        b'{"post_id": 1, "text": "ok"}\n{"post_id": 2,\n',
        "line 2: not valid JSON",
    ),
    "jsonl missing field": (
        "posts.jsonl",
        b'{"id": 1, "text": "ok"}\n',
        "missing field(s) post_id",
    ),
    "duplicate id": ("posts.csv", b"post_id,text\n1,a\n1,b\n", "duplicate post_id"),
    "unknown extension": ("posts.txt", b"post_id,text\n1,a\n", "unknown input format '.txt'"),
    "lone surrogate text": (
        "posts.jsonl",
        b'{"post_id": 1, "text": "ok"}\n{"post_id": 2, "text": "\\ud800"}\n',
        "line 2: text holds '\\ud800'",
    ),
    "lone surrogate id": (
        "posts.jsonl",
        b'{"post_id": "\\udfff", "text": "ok"}\n',
        "line 1: post_id holds '\\udfff'",
    ),
    # 1e2 came back as 100.0 and NaN as nan: the predictions no longer joined onto the posts
    "float post_id": ("posts.jsonl", b'{"post_id": 1e2, "text": "ok"}\n', "not the number 100.0"),
    "NaN post_id": ("posts.jsonl", b'{"post_id": NaN, "text": "ok"}\n', "not the number NaN"),
    "renamed fields": ("posts.jsonl", b'{"id": 1, "body": "ok"}\n', "(found id, body)"),
    "post_id of 5,000 digits": (
        "posts.jsonl",
        b'{"post_id": ' + b"7" * 5000 + b', "text": "ok"}\n',
        "line 1: a number too long to read",
    ),
}


def assert_refused(capsys, argv: list[str], out: Path, *expected: str) -> None:
    capsys.readouterr()  # what a fixture printed training its model
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for text in expected:
        assert text in err, err
    assert not out.exists()
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")], (
        "no staging file left"
    )


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(trained, tmp_path, capsys, case):
    _, model_dir = trained("multilabel")
    name, content, message = BAD_INPUTS[case]
    input_path = tmp_path / name
    input_path.write_bytes(content)
    out = tmp_path / "predictions.csv"
    assert_refused(
        capsys,
        ["predict", str(model_dir), "--input", str(input_path), "--out", str(out)],
        out,
        message,
    )


def broken_models(model_dir: Path, tmp_path: Path) -> dict[str, tuple[Path, str]]:
    def copy(name: str) -> Path:
        return Path(shutil.copytree(model_dir, tmp_path / name))

    no_meta = copy("no-json")
    (no_meta / "classifier.json").unlink()
    no_head = copy("no-head")
    (no_head / "head.safetensors").unlink()
    old = copy("no-inference")
    meta = json.loads((old / "classifier.json").read_text())
    (old / "classifier.json").write_text(json.dumps({**meta, "inference": {}}))
    garbled = copy("garbled")
    (garbled / "classifier.json").write_text("{not json")
    bad_head = copy("bad-head")
    (bad_head / "head.safetensors").write_bytes(b"\x00" * 16)
    a_file = tmp_path / "model.safetensors"
    a_file.write_bytes(b"\x00" * 16)
    return {
        "missing folder": (tmp_path / "nowhere", "no such folder"),
        "a file": (a_file, "a file, not a folder; pass a model folder"),
        "no classifier.json": (no_meta, "no classifier.json"),
        "no head": (no_head, "missing head.safetensors"),
        "no inference settings": (old, "not a valid classifier.json: inference.formulation"),
        "garbled classifier.json": (garbled, "cannot read classifier.json"),
        "garbled weights": (bad_head, "head.safetensors is not the file saved with"),
    }


def test_a_folder_that_is_not_a_model_is_one_line_exit_2(trained, tmp_path, capsys):
    _, model_dir = trained("multilabel")
    input_path = tmp_path / "posts.csv"
    input_path.write_text("post_id,text\n1,I feel hopeless.\n", encoding="utf-8")
    out = tmp_path / "predictions.csv"
    cases = broken_models(model_dir, tmp_path / "models")
    capsys.readouterr()  # what training the model printed, when this test runs first
    for case, (folder, message) in cases.items():
        assert main(["predict", str(folder), "--input", str(input_path), "--out", str(out)]) == 2, (
            case
        )
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, (case, err)
        assert not out.exists(), case


def test_an_unwritable_out_or_a_missing_gpu_is_one_line_exit_2(trained, tmp_path, capsys):
    _, model_dir = trained("multilabel")
    input_path = tmp_path / "posts.csv"
    input_path.write_text("post_id,text\n1,I feel hopeless.\n", encoding="utf-8")
    out = tmp_path / "missing-folder" / "predictions.csv"
    capsys.readouterr()  # the trained fixture's own loading bars, when it ran just now
    assert (
        main(
            [
                "predict",
                str(model_dir),
                "--input",
                str(input_path),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 2
    )
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not out.exists()
    if not torch.cuda.is_available():
        out = tmp_path / "predictions.csv"
        assert_refused(
            capsys,
            [
                "predict",
                str(model_dir),
                "--input",
                str(input_path),
                "--out",
                str(out),
                "--device",
                "cuda",
            ],
            out,
            "no usable GPU",
        )


@pytest.mark.parametrize("device", ["meta", "mps", "xla", "cuda:x"])
def test_a_device_that_cannot_run_here_is_one_line_exit_2(trained, tmp_path, capsys, device):
    _, model_dir = trained("multilabel")
    out = tmp_path / "predictions.csv"
    argv = ["predict", str(model_dir), "--input", str(write_posts(tmp_path / "posts.csv"))]
    assert_refused(capsys, [*argv, "--out", str(out), "--device", device], out, "unknown device")


def test_an_input_that_is_not_a_file_says_what_it_is(trained, tmp_path, capsys):
    _, model_dir = trained("multilabel")
    folder = tmp_path / "posts.csv"
    folder.mkdir()
    fifo = tmp_path / "posts.jsonl"
    os.mkfifo(fifo)
    out = tmp_path / "predictions.csv"
    for path, what in (
        (folder, "is a folder, not a file"),
        (fifo, "is a FIFO (a named pipe), not a file"),
    ):
        argv = ["predict", str(model_dir), "--input", str(path), "--out", str(out)]
        assert_refused(capsys, argv, out, f"{path}: {what}; pass --input a .csv or .jsonl file")


@pytest.mark.parametrize("name", ["predictions.jsonl", "predictions.parquet", "predictions"])
def test_one_models_predictions_to_another_formats_name_are_refused(tmp_path, capsys, name):
    """A CSV was written under any name: `--out p.jsonl` held CSV that JSON readers choke on."""
    out = tmp_path / name
    argv = ["predict", str(tmp_path / "model"), "--input", "x.csv", "--out", str(out)]
    said = f"--out {out}: one model's predictions are a CSV"
    assert_refused(capsys, argv, out, said, "name it .csv")


def test_html_beside_a_model_folder_says_html_needs_the_pair(tmp_path, capsys):
    out = tmp_path / "out.csv"
    argv = ["predict", str(tmp_path), "--html", str(tmp_path / "r.html"), "--input", "x.csv"]
    assert_refused(capsys, [*argv, "--out", str(out)], out, "--html needs the joined prediction")


def test_a_criteria_model_refuses_evidence_calls(trained):
    _, model_dir = trained("multilabel")
    with pytest.raises(Exception, match="call predict"):
        load_classifier(model_dir, device="cpu").predict_evidence(["I am tired."])


def test_a_lora_model_predicts_what_training_scores(tiny_roberta, sample_dir, tmp_path):
    """The folder holds only adapters; the base encoder is loaded from where classifier.json names
    it."""
    pytest.importorskip("peft")
    config = TrainConfig(
        task="criteria",
        criteria_formulation="multilabel",
        encoder=str(tiny_roberta),
        data_dir=str(sample_dir),
        epochs=1,
        max_length=64,
        learning_rate=5e-3,
        adapter="lora",
        lora_r=4,
        mixed_precision="no",
        device="cpu",
        checkpoint_dir=str(tmp_path / "checkpoint"),
    )
    train(config)
    assert (tmp_path / "checkpoint" / "adapter").is_dir() and not (
        tmp_path / "checkpoint" / "encoder"
    ).exists()
    input_path, ids, texts = validation_posts(config, sample_dir, tmp_path)
    split, probs = training_scores(config, tmp_path / "checkpoint")
    api = load_classifier(tmp_path / "checkpoint", device="cpu").predict(texts)
    np.testing.assert_allclose(
        api.probabilities, post_matrix(split, probs)[1], rtol=1e-5, atol=1e-6
    )


def write_posts(path: Path) -> Path:
    path.write_text("post_id,text\n1,I feel hopeless.\n2,Slept well.\n", encoding="utf-8")
    return path


def test_predict_never_overwrites_its_input_or_its_model(trained, tmp_path, capsys):
    _, model_dir = trained("multilabel")
    posts = write_posts(tmp_path / "posts.csv")
    before = posts.read_bytes()
    (tmp_path / "link.csv").symlink_to(posts)
    for out in (posts, tmp_path / "link.csv"):
        for force in ((), ("--force",)):  # --force never reaches the input
            assert (
                main(["predict", str(model_dir), "--input", str(posts), "--out", str(out), *force])
                == 2
            )
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "is the --input file" in err, err
    assert posts.read_bytes() == before
    head = (model_dir / "head.safetensors").read_bytes()
    assert (
        main(
            [
                "predict",
                str(model_dir),
                "--input",
                str(posts),
                "--out",
                str(model_dir / "head.safetensors"),
                "--force",
            ]
        )
        == 2
    )
    assert "lies inside the model folder" in capsys.readouterr().err
    assert (model_dir / "head.safetensors").read_bytes() == head


def test_predict_replaces_only_its_own_earlier_output_without_force(trained, tmp_path, capsys):
    _, model_dir = trained("multilabel")
    posts = write_posts(tmp_path / "posts.csv")
    notes = tmp_path / "notes.csv"
    notes.write_text("my,own\nfile,here\n")
    argv = ["predict", str(model_dir), "--input", str(posts), "--out", str(notes), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a predictions file" in err and "--force" in err, err
    assert notes.read_text() == "my,own\nfile,here\n"
    rows = run_cli(model_dir, posts, notes, "--force")
    assert [row["post_id"] for row in rows] == ["1", "2"]
    assert [row["post_id"] for row in run_cli(model_dir, posts, notes)] == [
        "1",
        "2",
    ]  # a rerun replaces its output


def test_predict_writes_into_a_device_or_fifo_and_leaves_it_one(trained, tmp_path):
    """As root, ``--out /dev/null`` used to turn /dev/null into a regular file."""
    _, model_dir = trained("multilabel")
    posts = write_posts(tmp_path / "posts.csv")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()), daemon=True)
    reader.start()
    run_predict = ["predict", str(model_dir), "--input", str(posts), "--no-progress", "--out"]
    assert main([*run_predict, str(fifo)]) == 0
    reader.join(10)
    assert read and read[0].startswith("post_id,") and stat.S_ISFIFO(fifo.stat().st_mode)
    null = tmp_path / "null"
    try:
        # /dev/null's own device, in a temp folder
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        null.open("w").close()
    except OSError:
        pytest.skip("making and opening a device node needs root with CAP_MKNOD")
    assert main([*run_predict, str(null)]) == 0
    assert stat.S_ISCHR(null.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "pipe", "posts.csv"]


def edited(model_dir: Path, folder: Path, edit) -> Path:
    """A copy of the model whose classifier.json ``edit`` changed in place."""
    copy = Path(shutil.copytree(model_dir, folder))
    meta = json.loads((copy / "classifier.json").read_text())
    edit(meta)
    (copy / "classifier.json").write_text(json.dumps(meta))
    return copy


def cut_labels(meta: dict, keep: int = 3, heads_too: bool = False) -> None:
    block = meta["inference"]
    block["labels"] = block["labels"][:keep]
    block["thresholds"] = {label: block["thresholds"][label] for label in block["labels"]}
    if heads_too:
        meta["head"]["num_labels"] = keep


EDITS = {  # (model, edit, what the one line names)
    "negative max_length": (
        "multilabel",
        lambda m: m["inference"].update(max_length=-5),
        "not a valid classifier.json: inference.max_length",
    ),
    "max_length as text": (
        "multilabel",
        lambda m: m["inference"].update(max_length="128"),
        "not a valid classifier.json: inference.max_length",
    ),
    "max_length past the encoder": (
        "multilabel",
        lambda m: m["inference"].update(max_length=100000),
        "classifier.json was edited after hpo saved it",  # valid on its own: the seal
    ),
    "evidence relabelled criteria": (
        "evidence",
        lambda m: m.update(task="criteria"),
        "not a valid classifier.json: task",
    ),
    "num_labels 3": (
        "multilabel",
        lambda m: m["head"].update(num_labels=3),
        "not a valid classifier.json: head.num_labels",
    ),
    "labels cut to 3": ("multilabel", cut_labels, "not a valid classifier.json: head.num_labels"),
    "labels and head cut to 3": (
        "multilabel",
        lambda m: cut_labels(m, heads_too=True),
        "classifier.json was edited after hpo saved it",  # valid on its own: the seal
    ),
    "a threshold missing": (
        "multilabel",
        lambda m: m["inference"]["thresholds"].pop("ANHEDONIA"),
        "not a valid classifier.json: inference.thresholds",
    ),
    "a threshold above 1": (
        "pairs",
        lambda m: m["inference"]["thresholds"].update(ANHEDONIA=7),
        "not a valid classifier.json: inference.thresholds.ANHEDONIA",
    ),
    "an unknown key": (
        "pairs",
        lambda m: m["inference"].update(max_lenght=64),
        "not a valid classifier.json: inference.max_lenght",
    ),
    "unknown long_text": (
        "pairs",
        lambda m: m["inference"].update(long_text="squash"),
        "not a valid classifier.json: inference.long_text",
    ),
    # valid on their own: the seal ties them to the weights (issue #34, item 4)
    "two labels swapped": (
        "multilabel",
        lambda m: m["inference"]["labels"].insert(0, m["inference"]["labels"].pop(1)),
        "classifier.json was edited after hpo saved it",
    ),
    "another long_text": (
        "pairs",
        lambda m: m["inference"].update(long_text="head_tail"),
        "classifier.json was edited after hpo saved it",
    ),
    "a threshold moved": (
        "evidence",
        lambda m: m["inference"]["thresholds"].update(ANHEDONIA=0.9),
        "classifier.json was edited after hpo saved it",
    ),
    # hpo seals every model it saves: a file without its seal is an edit that removed it
    "its seal removed": (
        "multilabel",
        lambda m: m.pop("integrity"),
        "not a valid classifier.json: integrity: is required",
    ),
}


@pytest.mark.parametrize("case", EDITS)
def test_an_edited_classifier_json_is_one_line_exit_2(trained, tmp_path, capsys, case):
    formulation, edit, message = EDITS[case]
    _, model_dir = trained(formulation)
    model = edited(model_dir, tmp_path / "model", edit)
    out = tmp_path / "predictions.csv"
    assert_refused(
        capsys,
        [
            "predict",
            str(model),
            "--input",
            str(write_posts(tmp_path / "posts.csv")),
            "--out",
            str(out),
        ],
        out,
        message,
    )


def test_no_progress_silences_transformers_own_bars_too(trained, tmp_path, capfd):
    """``progress=False`` (``--no-progress``) is quiet also where transformers draws its own
    bars ("Loading weights"), as in any Python process that has not silenced them itself."""
    from transformers.utils import logging as hf_logging

    from hpo.cli.predict import model_on_file

    _, model_dir = trained("multilabel")
    posts = write_posts(tmp_path / "posts.csv")
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    try:
        capfd.readouterr()
        model_on_file(
            str(model_dir), str(posts), str(tmp_path / "out.csv"), 8, "cpu", 3, progress=False
        )
        err = capfd.readouterr().err
    finally:
        (hf_logging.enable_progress_bar if was_enabled else hf_logging.disable_progress_bar)()
    assert "Loading weights" not in err and "%|" not in err, err


def test_predict_runs_at_the_threads_asked_for(trained, tmp_path):
    """--threads (issue #48 item 2): on a machine busy with other work, 2 threads per process
    trained at 8 examples/s where 1 thread reached 106."""
    import torch

    from hpo.cli.predict import model_on_file

    _, model_dir = trained("multilabel")
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # not the 1 asked for below (tests/conftest.py runs tests at 1)
    try:
        model_on_file(
            str(model_dir),
            str(write_posts(tmp_path / "posts.csv")),
            str(tmp_path / "out.csv"),
            8,
            "cpu",
            3,
            progress=False,
            threads=1,
        )
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_no_progress_prints_a_progress_line_at_each_tenth_of_the_posts(
    trained, sample_dir, tmp_path
):
    """Without a bar, "logs only" means lines: a long prediction is never silent."""
    _, model_dir = trained("multilabel")
    posts = sample_dir / "redsm5_posts.csv"
    # --batch-size 1: blocks of 8 posts, the 60 posts in 8 steps
    result = predict_process(
        model_dir, posts, tmp_path / "predictions.csv", "--batch-size", "1", "--no-progress"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    progress = [line for line in lines if "[hpo] predicted " in line and " posts (" in line]
    done = [int(line.split("predicted ")[1].split("/")[0]) for line in progress]
    assert len(done) >= 5 and done == sorted(done) and done[-1] == 60, result.stderr
    assert all("/60 posts (" in line and "posts/s, ETA " in line for line in progress)
    assert "100%" in progress[-1] and "posts/s" in lines[-1] and lines[-1] not in progress


@pytest.fixture(scope="module")
def two_seeds(trained, tmp_path_factory):
    """The multilabel model and the same configuration trained with another seed."""
    config, first = trained("multilabel")
    second = tmp_path_factory.mktemp("seed1") / "checkpoint"
    train(dataclasses.replace(config, seed=1, checkpoint_dir=str(second)))
    return config, first, second


def test_an_ensemble_folder_predicts_the_mean_of_its_members_through_the_cli(
    two_seeds, sample_dir, tmp_path
):
    config, first, second = two_seeds
    folder = tmp_path / "ensemble"
    write_ensemble(folder, {"seed0": first, "seed1": second}, dict.fromkeys(SYMPTOMS, 0.3), None)
    input_path, ids, texts = validation_posts(config, sample_dir, tmp_path)
    rows = run_cli(folder, input_path, tmp_path / "predictions.csv")
    alone = [
        load_classifier(path, device="cpu").predict(texts).probabilities for path in (first, second)
    ]
    assert not np.allclose(alone[0], alone[1]), "two seeds, two models"
    mean = (alone[0] + alone[1]) / 2
    np.testing.assert_allclose(cli_matrix(rows, ids), mean, rtol=1e-5, atol=1e-6)
    decided = np.array([[int(row[symptom]) for symptom in SYMPTOMS] for row in rows], dtype=bool)
    assert (decided == (mean >= 0.3)).all(), "the ensemble decides at its own thresholds"
    assert read_settings(folder).thresholds == dict.fromkeys(SYMPTOMS, 0.3)


def test_an_ensemble_of_models_that_predict_different_things_is_refused(
    two_seeds, trained, tmp_path, capsys
):
    _, first, second = two_seeds
    _, pairs = trained("pairs")
    with pytest.raises(InvalidClassifierFile, match="formulation differs"):
        write_ensemble(
            tmp_path / "mixed", {"a": first, "b": pairs}, dict.fromkeys(SYMPTOMS, 0.5), None
        )
    assert not (tmp_path / "mixed").exists(), "nothing half-written"

    with pytest.raises(InvalidClassifierFile, match="a and b are the same model"):
        write_ensemble(
            tmp_path / "twice", {"a": first, "b": first}, dict.fromkeys(SYMPTOMS, 0.5), None
        )
    assert not (tmp_path / "twice").exists(), "nothing half-written"

    good = tmp_path / "good"
    write_ensemble(good, {"a": first, "b": second}, dict.fromkeys(SYMPTOMS, 0.5), None)
    input_path = write_posts(tmp_path / "posts.csv")
    out = tmp_path / "predictions.csv"
    invalid = "not a valid ensemble.json"

    def relink(folder: Path) -> None:  # members/b: a link to the same model outside
        shutil.rmtree(folder / "members" / "b")
        (folder / "members" / "b").symlink_to(second)

    def copy_a(folder: Path) -> None:  # members/b: a copy of members/a
        shutil.rmtree(folder / "members" / "b")
        shutil.copytree(folder / "members" / "a", folder / "members" / "b")

    def threshold(body: dict) -> dict:
        body["inference"]["thresholds"][SYMPTOMS[0]] = 0.9
        return body

    cases = {  # body edit, folder edit, what the one line names
        "escaping member": (lambda b: b | {"members": ["a", "../a"]}, None, invalid, "folder name"),
        "missing member": (lambda b: b | {"members": ["a", "c"]}, None, invalid, "members/c holds"),
        "one member": (lambda b: b | {"members": ["a"]}, None, invalid, "members"),
        "unknown key": (lambda b: b | {"extra": 1}, None, invalid, "extra"),
        # issue #34, item 4
        "a member twice": (
            lambda b: b | {"members": ["a", "a"]},
            None,
            invalid,
            "listed twice",
        ),
        "a member linked out": (None, relink, invalid, "members/b is a link (to "),
        "a member copied": (None, copy_a, invalid, "a and b are the same model"),
        "a threshold moved": (threshold, None, "ensemble.json (or a member's", "edited after"),
        "its seal removed": (
            lambda b: {k: v for k, v in b.items() if k != "integrity"},
            None,
            invalid,
            "integrity: field required",
        ),
    }
    for case, (edit, change, *message) in cases.items():
        broken = Path(shutil.copytree(good, tmp_path / case.replace(" ", "-"), symlinks=True))
        if edit is not None:
            body = json.loads((broken / ENSEMBLE_FILE).read_text())
            (broken / ENSEMBLE_FILE).write_text(json.dumps(edit(body)))
        if change is not None:
            change(broken)
        assert_refused(
            capsys,
            ["predict", str(broken), "--input", str(input_path), "--out", str(out)],
            out,
            *message,
        )


ADDED_TOKENIZER_FILES = {  # issue #48, item 12: predictions flipped; an 88-line IndexError
    "special tokens added": '{"additional_special_tokens": ["e", "a", "in", "er"]}',
    "special tokens renamed": '{"cls_token": "the", "bos_token": "the"}',
}


@pytest.mark.parametrize("ensemble", [False, True], ids=["model", "ensemble member"])
@pytest.mark.parametrize("case", ADDED_TOKENIZER_FILES)
def test_a_file_added_to_a_saved_model_is_one_line_exit_2(
    request, trained, tmp_path, case, ensemble
):
    """``hpo predict`` as a user runs it: a file the seal does not list is never loaded."""
    if ensemble:
        _, first, second = request.getfixturevalue("two_seeds")
        model = tmp_path / "ensemble"
        write_ensemble(model, {"a": first, "b": second}, dict.fromkeys(SYMPTOMS, 0.5), None)
        added = model / "members" / "b" / "tokenizer" / "special_tokens_map.json"
    else:
        model = Path(shutil.copytree(trained("multilabel")[1], tmp_path / "model"))
        added = model / "tokenizer" / "special_tokens_map.json"
    added.write_text(ADDED_TOKENIZER_FILES[case])
    out = tmp_path / "predictions.csv"
    result = predict_process(model, write_posts(tmp_path / "posts.csv"), out, "--no-progress")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"hpo: error: {added} is not among the files saved with {added.parents[1]}/classifier.json"
        " (added after hpo saved the model, or its entry removed from the seal) and would change "
        "what the model loads; remove it, or restore the original model folder, or re-save the "
        "model with hpo retrain / hpo finalize"
    ]
    assert not out.exists()
