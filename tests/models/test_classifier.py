"""Criteria and evidence classifiers on both architectures: train a step, right logits,
DataParallel, a safetensors round trip, and classifier.json sealed to the weights beside it."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from hpo.cli import main
from hpo.errors import NonFiniteWeights
from hpo.models.classifier import (
    CriteriaClassifier,
    EvidenceClassifier,
    HeadConfig,
    build_classifier,
    load_classifier,
    save_classifier,
)
from hpo.models.classifier_file import (
    FILE_NAME,
    FULL_HASH_BYTES,
    HEAD,
    SAMPLE_BYTES,
    SAMPLES,
    InvalidClassifierFile,
    ModelFolderChanged,
    _digest,
    file_digest,
    read_classifier_file,
    read_inference,
    rewrite_inference,
    write_classifier_file,
)
from hpo.models.device import safe_to_device
from hpo.models.inference import InferenceSettings
from hpo.models.loading import find_meta_tensors
from hpo.models.tokenizer import load_tokenizer


def _batch(tokenizer, n=4):
    pairs = [
        ("Depressed mood most of the day.", "I have felt empty and hopeless for weeks."),
        ("Insomnia or hypersomnia.", "I slept fine."),
        ("Fatigue or loss of energy.", "Every morning I am exhausted before I even start."),
        ("Diminished ability to think.", "I walked the dog."),
    ][:n]
    enc = tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    return dict(enc), torch.tensor([1, 0, 1, 0][:n])


@pytest.mark.parametrize("task", ["criteria", "evidence"])
@pytest.mark.parametrize(
    "head",
    [HeadConfig(), HeadConfig(pooling="mean", hidden_layers=3, hidden_size=32, activation="relu")],
)
def test_trains_one_step_with_right_logits(tiny_encoder, task, head):
    model = build_classifier(task, tiny_encoder, head)
    assert isinstance(model, CriteriaClassifier if task == "criteria" else EvidenceClassifier)
    model = safe_to_device(model, "cpu", checkpoint=tiny_encoder)
    tokenizer = load_tokenizer(tiny_encoder)
    inputs, labels = _batch(tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    logits = model(**inputs)
    assert logits.shape == (4, 1)  # one logit: BCE
    nn.functional.binary_cross_entropy_with_logits(logits.squeeze(-1), labels.float()).backward()
    optimizer.step()
    changed = {n for n, p in model.named_parameters() if not torch.equal(before[n], p)}
    assert any(n.startswith("encoder.") for n in changed), "the encoder must be fine-tuned"
    assert any(n.startswith("head.") for n in changed)


def test_encoder_dropout_override_reaches_the_encoder(tiny_roberta):
    model = build_classifier("criteria", tiny_roberta, encoder_dropout=0.3)
    assert model.encoder.config.hidden_dropout_prob == 0.3
    assert model.encoder.embeddings.dropout.p == 0.3


def test_data_parallel_trains_and_saves(tiny_roberta, tmp_path):
    model = nn.DataParallel(build_classifier("evidence", tiny_roberta))
    model = safe_to_device(model, "cpu")
    tokenizer = load_tokenizer(tiny_roberta)
    inputs, labels = _batch(tokenizer, n=2)
    nn.functional.binary_cross_entropy_with_logits(
        model(**inputs).squeeze(-1), labels.float()
    ).backward()
    save_classifier(model, tmp_path / "ckpt", tokenizer)
    assert isinstance(model, nn.DataParallel), "saving must not unwrap the caller's reference"
    assert json.loads((tmp_path / "ckpt" / "classifier.json").read_text())["task"] == "evidence"


def test_save_load_round_trip_gives_identical_logits(tiny_encoder, tmp_path):
    model = build_classifier("criteria", tiny_encoder, HeadConfig(hidden_layers=1, hidden_size=16))
    tokenizer = load_tokenizer(tiny_encoder)
    with torch.no_grad():  # move the head away from its init so the round trip is tested
        for p in model.head.parameters():
            p.add_(0.5)
    save_classifier(model, tmp_path, tokenizer)
    assert (tmp_path / "head.safetensors").exists() and (
        tmp_path / "encoder" / "model.safetensors"
    ).exists()
    assert not list(tmp_path.rglob("*.bin")) and not list(tmp_path.rglob("*.pt")), "nothing pickled"
    loaded, loaded_tokenizer = load_classifier(tmp_path)
    assert isinstance(loaded, CriteriaClassifier) and loaded.head_config == model.head_config
    assert find_meta_tensors(loaded) == []
    inputs, _ = _batch(loaded_tokenizer)
    model.eval(), loaded.eval()
    with torch.no_grad():
        assert torch.equal(model(**inputs), loaded(**inputs))


SYMPTOMS = ("DEPRESSED_MOOD", "ANHEDONIA", "FATIGUE")


@pytest.fixture
def saved(tiny_roberta, tmp_path):
    """A multilabel criteria classifier saved with its inference settings."""
    model = build_classifier("criteria", tiny_roberta, HeadConfig(num_labels=len(SYMPTOMS)))
    settings = InferenceSettings(
        formulation="multilabel",
        labels=SYMPTOMS,
        max_length=64,
        long_text="chunks",
        thresholds=dict.fromkeys(SYMPTOMS, 0.5),
    )
    return save_classifier(model, tmp_path / "model", load_tokenizer(tiny_roberta), settings)


def _edit(folder, change) -> None:
    meta = json.loads((folder / FILE_NAME).read_text())
    change(meta)
    (folder / FILE_NAME).write_text(json.dumps(meta, indent=2))


VALID_EDITS = {  # each keeps classifier.json valid and changes what the model predicts
    "two labels swapped": lambda m: m["inference"].update(
        labels=["ANHEDONIA", "DEPRESSED_MOOD", "FATIGUE"]
    ),
    "another long_text": lambda m: m["inference"].update(long_text="truncate"),
    "a threshold moved": lambda m: m["inference"]["thresholds"].update(FATIGUE=0.9),
    "another max_length": lambda m: m["inference"].update(max_length=32),
}


@pytest.mark.parametrize("case", VALID_EDITS)
def test_a_valid_looking_edit_of_the_settings_is_refused_on_every_load(saved, case):
    _edit(saved, VALID_EDITS[case])
    read_classifier_file(json.loads((saved / FILE_NAME).read_text()))  # still valid on its own
    for load in (load_classifier, read_inference):  # weights (predict, explain, holdout); settings
        with pytest.raises(ModelFolderChanged, match="classifier.json was edited after hpo saved"):
            load(saved)


def test_settings_moved_onto_other_weights_are_refused(saved, tiny_roberta, tmp_path):
    other = build_classifier("criteria", tiny_roberta, HeadConfig(num_labels=len(SYMPTOMS)))
    save_classifier(other, tmp_path / "other", load_tokenizer(tiny_roberta), read_inference(saved))
    shutil.copy(saved / FILE_NAME, tmp_path / "other" / FILE_NAME)
    with pytest.raises(ModelFolderChanged, match="head.safetensors is not the file saved with"):
        load_classifier(tmp_path / "other")


# issue #48, item 12: each changes how the model reads text or which weights it loads
ADDED_FILES = {
    "tokenizer/special_tokens_map.json": '{"additional_special_tokens": ["e", "a", "in", "er"]}',
    "tokenizer/added_tokens.json": '{"the": 3}',
    "encoder/generation_config.json": "{}",
    "adapter/adapter_config.json": "{}",
}


@pytest.mark.parametrize("name", ADDED_FILES)
def test_a_file_added_to_a_sealed_folder_is_refused_on_every_load(saved, name):
    (saved / name).parent.mkdir(exist_ok=True)
    (saved / name).write_text(ADDED_FILES[name])
    for load in (load_classifier, read_inference):
        with pytest.raises(ModelFolderChanged, match=f"{name} is not among the files saved with"):
            load(saved)
    (saved / name).unlink()
    load_classifier(saved)  # nothing else changed


def _reseal_without(folder, name) -> None:
    """What a hand edit of the seal can do: drop ``name``'s entry and recompute the digest over
    what is left, as anyone can (sha256 is no secret)."""

    def drop(meta):
        del meta["integrity"]["files"][name]
        meta["integrity"]["digest"] = _digest(meta, meta["integrity"]["files"])

    _edit(folder, drop)


@pytest.mark.parametrize("name", ["head.safetensors", "encoder/model.safetensors"])
def test_a_seal_that_no_longer_lists_a_weight_file_is_refused(saved, tiny_roberta, tmp_path, name):
    other = save_classifier(
        build_classifier("criteria", tiny_roberta, HeadConfig(num_labels=len(SYMPTOMS))),
        tmp_path / "other",
        load_tokenizer(tiny_roberta),
        read_inference(saved),
    )
    _reseal_without(saved, name)
    shutil.copy(other / name, saved / name)  # then swapped: other weights, unchecked
    for load in (load_classifier, read_inference):
        with pytest.raises(ModelFolderChanged, match=f"{name} is not among the files saved with"):
            load(saved)


def test_a_seal_naming_a_file_hpo_never_seals_is_not_a_seal(saved):
    def add(meta):
        meta["integrity"]["files"]["../elsewhere.bin"] = "0" * 64
        meta["integrity"]["digest"] = _digest(meta, meta["integrity"]["files"])

    _edit(saved, add)
    (saved.parent / "elsewhere.bin").write_bytes(b"x")
    with pytest.raises(InvalidClassifierFile, match="'../elsewhere.bin', not a file hpo seals"):
        read_inference(saved)


def test_the_seal_survives_a_copy_and_a_rewrite_by_hpo(saved, tmp_path):
    copy = shutil.copytree(saved, tmp_path / "elsewhere" / "model")
    moved = dataclasses.replace(read_inference(copy), thresholds=dict.fromkeys(SYMPTOMS, 0.3))
    rewrite_inference(copy, moved)  # finalize's refit: new thresholds, sealed again
    assert read_inference(copy) == moved
    load_classifier(copy)


def test_a_model_without_its_seal_is_refused_on_every_load(saved):
    """hpo seals every model it saves: a classifier.json without its seal had it removed, and
    would otherwise load whatever settings an edit left."""
    _edit(saved, lambda m: m.pop("integrity"))
    for load in (load_classifier, read_inference):
        with pytest.raises(InvalidClassifierFile, match="^integrity: is required$"):
            load(saved)


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_weight_files_get_the_mode_text_outputs_get(tiny_roberta, tmp_path, umask):
    """safetensors writes 0600 whatever the umask: others sharing output_dir could not load."""
    model = build_classifier("evidence", tiny_roberta)
    old = os.umask(umask)
    try:
        save_classifier(model, tmp_path / "model", load_tokenizer(tiny_roberta))
    finally:
        os.umask(old)
    modes = {
        p.relative_to(tmp_path).as_posix(): oct(p.stat().st_mode & 0o777)
        for p in (tmp_path / "model").rglob("*")
        if p.is_file()
    }
    assert "model/head.safetensors" in modes and "model/encoder/model.safetensors" in modes
    assert set(modes.values()) == {oct(0o666 & ~umask)}, modes


def test_a_large_weight_file_is_sampled_header_and_body_alike(tmp_path):
    """Above FULL_HASH_BYTES only the header and SAMPLES slices spread over the file are read:
    a change in either changes the digest (one between slices would not: no two trainings
    differ there alone)."""
    path = tmp_path / "model.safetensors"
    header = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    body = bytearray(len(header).to_bytes(8, "little") + header)
    body += bytes(FULL_HASH_BYTES + (1 << 20))
    path.write_bytes(body)
    first = file_digest(path)
    middle = 8 * (len(body) - SAMPLE_BYTES) // (SAMPLES - 1) + 10  # inside the 9th slice
    for offset in (12, middle, len(body) - 1):  # the header, a middle slice, the end
        changed = bytearray(body)
        changed[offset] ^= 1
        path.write_bytes(changed)
        assert file_digest(path) != first, offset


def _poisoned(model: nn.Module) -> nn.Module:
    """``model`` with one weight NaN and one inf: what a learning rate of 1e30 leaves."""
    with torch.no_grad():
        model.head[-1].weight[0, 0] = float("nan")
        model.encoder.embeddings.word_embeddings.weight[3, 1] = float("inf")
    return model


def test_a_classifier_of_non_finite_weights_is_not_saved(saved, tiny_roberta, tmp_path):
    """#55: a diverged training saved NaN weights, sealed, that predicted nan with exit 0."""
    model = _poisoned(build_classifier("criteria", tiny_roberta, HeadConfig(num_labels=3)))
    settings = read_inference(saved)
    with pytest.raises(NonFiniteWeights, match=r"refusing to save .*NaN or inf in 2 tensor") as e:
        save_classifier(model, tmp_path / "nan", load_tokenizer(tiny_roberta), settings)
    assert "\n" not in str(e.value) and "lower learning_rate" in str(e.value)
    assert not (tmp_path / "nan").exists(), "nothing half-saved is left"


def test_a_sealed_classifier_of_non_finite_weights_is_refused_on_load(saved, tmp_path, capsys):
    """One saved before saving refused them (sealed as hpo seals): loading says so on one line,
    and ``hpo predict`` exits 2 without writing a nan."""
    model, _ = load_classifier(saved)
    _poisoned(model)
    model.encoder.save_pretrained(saved / "encoder")
    save_file({k: v.contiguous() for k, v in model.head.state_dict().items()}, saved / HEAD)
    write_classifier_file(saved, json.loads((saved / FILE_NAME).read_text()))
    with pytest.raises(NonFiniteWeights, match="weights are not finite") as caught:
        load_classifier(saved)
    assert "\n" not in str(caught.value) and "lower learning_rate" in str(caught.value)
    posts, out = tmp_path / "posts.csv", tmp_path / "predictions.csv"
    posts.write_text("post_id,text\n1,I feel hopeless.\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["predict", str(saved), "--input", str(posts), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "weights are not finite" in err, err
    assert not out.exists()
