"""The training loop on tiny real encoders and sample data: it learns, backs off on
out-of-memory without skipping data, stops when report raises, and keeps the best epoch."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from hpo.data import SYMPTOMS
from hpo.data.collate import Collator
from hpo.data.tokenize import cache_info
from hpo.errors import OutOfMemoryError
from hpo.fixtures import write_sample
from hpo.models.classifier import EncoderClassifier, load_classifier
from hpo.models.device import forward_keys
from hpo.train.config import TrainConfig
from hpo.train.evaluate import evaluate, score
from hpo.train.loop import train
from hpo.train.metrics import binary_metrics
from hpo.train.prepare import prepare_data


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory):
    return write_sample(tmp_path_factory.mktemp("sample"), posts=120, seed=3)


def _config(encoder, data_dir, **overrides) -> TrainConfig:
    base = dict(
        task="evidence",
        encoder=str(encoder),
        data_dir=str(data_dir),
        epochs=3,
        learning_rate=3e-3,
        batch_size=16,
        max_length=64,
        seed=0,
        pooling="mean",
        warmup_ratio=0.1,
        class_weighting="balanced",
        mixed_precision="no",
    )  # float32: exact comparisons below
    return TrainConfig(**{**base, **overrides})


@pytest.mark.slow
def test_evidence_training_beats_chance(tiny_roberta, sample_dir):
    # Training draws 3 unannotated sentences per annotated one each epoch; validation keeps every
    # sentence.
    result = train(_config(tiny_roberta, sample_dir, epochs=6, evidence_negative_ratio=3.0))
    # one-class answers score ~0.4, coin flips ~0.5
    assert result.metrics["macro_f1"] > 0.65, result.history
    assert result.epochs_run == 6 and len(result.history) == 6


@pytest.mark.slow
def test_criteria_training_beats_chance_and_reports_post_level_f1(tiny_roberta, sample_dir):
    config = _config(tiny_roberta, sample_dir, task="criteria", epochs=3, max_length=96)
    result = train(config)
    labels = prepare_data(config).validation.tokens.labels.ravel()
    always_no = binary_metrics(labels, np.zeros(len(labels)))[
        "macro_f1"
    ]  # what a model that learned nothing scores
    assert result.metrics["macro_f1"] > always_no + 0.08, (always_no, result.history)
    assert {"post_micro_f1", "post_macro_f1", "auroc"} <= set(result.metrics)


def test_the_best_epochs_value_comes_with_its_interval_over_the_validation_posts(
    tiny_roberta, sample_dir
):
    """#35: a trial's value on ~150 validation posts moves by a tenth with the posts drawn; the
    interval is what hpo best and the tune summary show beside it."""
    config = _config(
        tiny_roberta,
        sample_dir,
        task="criteria",
        criteria_formulation="multilabel",
        objective_metric="post_macro_f1",
        epochs=2,
        max_length=64,
    )
    result = train(config)
    interval = result.interval
    assert interval["level"] == 0.95 and interval["resamples"] == 2000
    assert interval["posts"] == len(prepare_data(config).validation)  # a post per example
    assert 0 <= interval["low"] <= result.value <= interval["high"] <= 1, (interval, result.value)
    assert interval["high"] - interval["low"] > 0.01  # a handful of posts: a wide interval
    # an example-level metric has no post x symptom matrix to resample
    assert (
        train(dataclasses.replace(config, objective_metric="macro_f1", epochs=1)).interval is None
    )


@pytest.mark.slow
def test_returns_the_best_epoch_not_the_last(tiny_roberta, sample_dir):
    reported: list[tuple[int, float]] = []
    result = train(
        _config(tiny_roberta, sample_dir, epochs=4, learning_rate=5e-3),
        report=lambda s, v, m: reported.append((s, v)),
    )
    values = [h["macro_f1"] for h in result.history]
    assert reported == list(enumerate(values, start=1))
    assert result.metrics["macro_f1"] == max(values)
    assert result.best_epoch == values.index(max(values)) + 1


@pytest.mark.slow
def test_raising_report_stops_training_at_once(tiny_roberta, sample_dir):
    class Pruned(Exception):
        pass

    calls = []

    def report(step, value, metrics):
        calls.append(step)
        raise Pruned

    forwards = []
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda module, args, out: (
            forwards.append(1) if isinstance(module, EncoderClassifier) else None
        )
    )
    try:
        with pytest.raises(Pruned):
            train(_config(tiny_roberta, sample_dir, epochs=5), report=report)
    finally:
        handle.remove()
    assert calls == [1]
    forwards_after_prune = len(forwards)
    assert forwards_after_prune > 0
    data = prepare_data(_config(tiny_roberta, sample_dir))
    one_epoch = -(-len(data.train) // 16) + -(-len(data.validation) // 64)
    assert forwards_after_prune == one_epoch, "nothing may run after the report raised"


class _OutOfMemoryAbove:
    """Makes the classifier's forward fail as CUDA does when a micro-batch has more than
    ``limit`` rows, and counts the rows of every training forward that succeeded."""

    def __init__(self, monkeypatch, limit: int):
        self.limit, self.trained_rows = limit, 0
        real_forward = EncoderClassifier.forward

        def forward(module, input_ids, **kwargs):
            if input_ids.shape[0] > self.limit:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            if module.training:
                self.trained_rows += input_ids.shape[0]
            return real_forward(module, input_ids, **kwargs)

        monkeypatch.setattr(EncoderClassifier, "forward", forward)


@pytest.mark.slow
def test_out_of_memory_backs_off_keeps_effective_batch_and_skips_nothing(
    tiny_roberta, sample_dir, monkeypatch
):
    config = _config(
        tiny_roberta, sample_dir, epochs=2, batch_size=16, encoder_dropout=0.0, head_dropout=0.0
    )
    reference = train(dataclasses.replace(config, micro_batch_size=4))
    oom = _OutOfMemoryAbove(monkeypatch, limit=5)
    result = train(config)
    n_train = len(prepare_data(config).train)
    assert result.micro_batch_size == 4
    assert oom.trained_rows == 2 * n_train, "every example of every epoch was trained on"
    assert result.samples_trained == 2 * n_train
    # Same effective batch: the run matches one that used micro-batch 4 from the start.
    for got, want in zip(result.history, reference.history, strict=True):
        assert got["macro_f1"] == pytest.approx(want["macro_f1"], abs=1e-6)
        assert got["auroc"] == pytest.approx(want["auroc"], abs=1e-4)


@pytest.mark.slow
def test_out_of_memory_at_micro_batch_one_says_so(tiny_roberta, sample_dir, monkeypatch):
    _OutOfMemoryAbove(monkeypatch, limit=0)
    with pytest.raises(OutOfMemoryError, match="even at micro-batch 1"):
        train(_config(tiny_roberta, sample_dir, epochs=1))


@pytest.mark.slow
def test_second_run_does_not_tokenize_again(tiny_roberta, sample_dir):
    config = _config(tiny_roberta, sample_dir, epochs=1, max_length=96)
    train(config)
    before = cache_info().tokenizations
    result = train(dataclasses.replace(config, learning_rate=1e-3, seed=1))
    assert cache_info().tokenizations == before
    assert result.setup_seconds < result.wall_seconds


@pytest.mark.slow
def test_checkpoint_of_best_epoch_reloads_for_prediction(tiny_deberta, sample_dir, tmp_path):
    config = _config(
        tiny_deberta, sample_dir, epochs=3, checkpoint_dir=str(tmp_path / "checkpoint")
    )
    result = train(config)
    assert result.checkpoint and not any(name.startswith("test_") for name in result.metrics)
    model, tokenizer = load_classifier(result.checkpoint)
    data = prepare_data(config)
    collate = Collator(tokenizer.pad_token_id, keep_keys=forward_keys(model))
    again = evaluate(model, data.validation, collate, config, torch.device("cpu")).metrics
    assert again["macro_f1"] == pytest.approx(result.metrics["macro_f1"], abs=1e-6)


@pytest.mark.slow
def test_optional_features_run(tiny_roberta, sample_dir):
    result = train(
        _config(
            tiny_roberta,
            sample_dir,
            epochs=2,
            activation_checkpointing=True,
            scheduler="cosine",
            class_weighting="sqrt",
            head_layers=2,
            pooling="mean",
            micro_batch_size=8,
            early_stopping_patience=1,
            head_learning_rate=1e-2,
            mixed_precision="bf16",
            label_smoothing=0.1,
            focal_gamma=1.0,
        )
    )
    assert 1 <= result.epochs_run <= 2 and result.micro_batch_size == 8


def test_both_formulations_give_identical_metrics_for_the_same_predictions(
    tiny_roberta, sample_dir
):
    pairs = prepare_data(_config(tiny_roberta, sample_dir, task="criteria")).validation
    multilabel = prepare_data(
        _config(tiny_roberta, sample_dir, task="criteria", criteria_formulation="multilabel")
    ).validation
    posts = list(dict.fromkeys(multilabel.post_ids))
    assert posts == list(dict.fromkeys(pairs.post_ids))  # one split for both
    matrix = np.random.default_rng(0).random((len(posts), len(SYMPTOMS)))
    row = {post: i for i, post in enumerate(posts)}
    pair_probs = np.array(
        [
            [matrix[row[p], SYMPTOMS.index(c)]]
            for p, c in zip(pairs.post_ids, pairs.criteria, strict=True)
        ]
    )
    from_pairs, from_posts = score(pairs, pair_probs), score(multilabel, matrix)
    assert from_pairs == from_posts
    assert {"post_micro_f1", "post_macro_f1", "tuned_post_macro_f1"} <= set(from_posts.metrics)
    assert set(from_posts.thresholds) == set(SYMPTOMS)


def test_multilabel_reads_each_post_once(tiny_roberta, sample_dir):
    tokens = {
        formulation: prepare_data(
            _config(tiny_roberta, sample_dir, task="criteria", criteria_formulation=formulation)
        ).train.tokens
        for formulation in ("pairs", "multilabel")
    }
    assert len(tokens["pairs"]) == 9 * len(tokens["multilabel"])
    assert tokens["multilabel"].labels.shape == (len(tokens["multilabel"]), 9)
    assert tokens["pairs"].lengths.sum() > 5 * tokens["multilabel"].lengths.sum()


@pytest.mark.slow
def test_multilabel_with_chunks_learns_and_sees_every_token(tiny_roberta, sample_dir, tmp_path):
    config = _config(
        tiny_roberta,
        sample_dir,
        task="criteria",
        criteria_formulation="multilabel",
        long_text="chunks",
        max_length=48,
        epochs=6,
        threshold="tuned",
        objective_metric="post_macro_f1",
        checkpoint_dir=str(tmp_path / "checkpoint"),
    )
    data = prepare_data(config)
    assert (np.diff(data.train.tokens.offsets) > 1).any(), (
        "some posts need several chunks at max_length 48"
    )
    result = train(config)
    assert result.token_coverage == {"train": 1.0, "validation": 1.0}
    assert result.value == result.metrics["tuned_post_macro_f1"]
    assert result.metrics["auroc"] > 0.6, result.history
    assert set(result.thresholds) == set(SYMPTOMS)
    saved = json.loads((tmp_path / "checkpoint" / "classifier.json").read_text())
    assert (
        saved["inference"]["formulation"] == "multilabel"
        and saved["inference"]["long_text"] == "chunks"
    )
    assert saved["inference"]["thresholds"] == pytest.approx(result.thresholds)
    assert saved["head"]["num_labels"] == 9


@pytest.mark.slow
def test_evidence_negative_ratio_subsamples_unannotated_training_sentences_only(
    tiny_roberta, sample_dir
):
    data = prepare_data(_config(tiny_roberta, sample_dir))
    train_split = data.train
    annotated = int(train_split.annotated.sum())
    assert 0 < annotated < len(train_split)
    one, again, other = (train_split.training_sample(0.5, seed) for seed in (1, 1, 2))
    assert (
        len(one) == annotated + round(0.5 * annotated)
        and (one == again).all()
        and (one != other).any()
    )
    assert set(np.flatnonzero(train_split.annotated)) <= set(one.tolist())
    assert len(train_split.training_sample(None, 1)) == len(train_split)
    result = train(_config(tiny_roberta, sample_dir, epochs=1, evidence_negative_ratio=0.5))
    assert result.samples_trained == len(one)
    assert {"average_precision", "recall_at_1", "recall_at_3"} <= set(result.metrics)


@pytest.mark.slow
def test_layerwise_decay_frozen_layers_and_attention_dropout_train_end_to_end(
    tiny_deberta, sample_dir
):
    config = _config(
        tiny_deberta,
        sample_dir,
        epochs=1,
        layerwise_lr_decay=0.8,
        freeze_layers=1,
        encoder_dropout=0.0,
        attention_dropout=0.2,
        label_smoothing=0.1,
        focal_gamma=1.0,
    )
    result = train(config)
    assert result.epochs_run == 1 and 0.0 <= result.value <= 1.0


def test_cv_folds_hold_out_each_train_or_validation_post_once_and_leave_test_alone(
    tiny_roberta, sample_dir
):
    config = _config(tiny_roberta, sample_dir, task="criteria", criteria_formulation="multilabel")
    plain = prepare_data(config)
    pool = {*plain.train.post_ids, *plain.validation.post_ids}
    held = []
    for fold in range(3):
        data = prepare_data(dataclasses.replace(config, cv_fold=(3, fold)))
        assert set(data.test.post_ids) == set(plain.test.post_ids), "test is untouched"
        assert {*data.train.post_ids, *data.validation.post_ids} == pool
        assert not set(data.train.post_ids) & set(data.validation.post_ids)
        held.append(set(data.validation.post_ids))
    assert sorted(post for fold in held for post in fold) == sorted(pool), "each post held once"
    with pytest.raises(ValueError, match=r"must be \(K, i\) with 0 <= i < K, got \(3, 3\)"):
        dataclasses.replace(config, cv_fold=(3, 3))
