"""whole_post: every sentence scored and pooled per post; exact gradients whatever a post's
length; the sentence loss reads the training posts' evidence only; the sentences rank evidence as
the evidence task measures it; a symptom stated only in the middle of a long post is found."""

from __future__ import annotations

import csv
import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from hpo.data import SYMPTOMS
from hpo.data.sentences import split_sentences
from hpo.fixtures import write_sample
from hpo.train.config import TrainConfig
from hpo.train.evaluate import split_scores
from hpo.train.loop import train
from hpo.train.metrics import evidence_metrics
from hpo.train.posts import SentenceLoss, accumulate_post_gradients, evidence_ranking
from hpo.train.prepare import prepare_data
from hpo.train.setup import set_up


@pytest.fixture(scope="module")
def long_posts(tmp_path_factory) -> Path:
    """Realistic lengths: at max_length 48 most posts take several windows."""
    return write_sample(tmp_path_factory.mktemp("long"), posts=60, seed=1, profile="realistic")


def _config(encoder, data_dir, **overrides) -> TrainConfig:
    base = dict(
        task="criteria",
        criteria_formulation="whole_post",
        encoder=str(encoder),
        data_dir=str(data_dir),
        epochs=1,
        learning_rate=3e-3,
        batch_size=8,
        max_length=48,
        seed=0,
        mixed_precision="no",
        objective_metric="post_macro_f1",
    )
    return TrainConfig(**{**base, **overrides})


@pytest.mark.parametrize("pooling", ["logsumexp", "attention"])
def test_a_long_post_in_checkpointed_parts_gets_the_gradient_of_one_pass(
    tiny_roberta, long_posts, pooling
):
    config = _config(
        tiny_roberta,
        long_posts,
        post_pooling=pooling,
        evidence_loss_weight=1.0,
        hard_negative_weight=1.0,
    )
    run = set_up(config)
    run.model.eval()  # no dropout: the two ways compute one function
    counts = np.diff(run.data.train.tokens.offsets)
    batch = [int(np.argmax(counts >= 5)), int(np.argmax(counts == 1)), int(np.argmax(counts == 2))]
    assert counts[batch[0]] >= 5

    def gradients(micro: int) -> tuple[float, list[torch.Tensor]]:
        run.optimizer.zero_grad()
        unbounded = dataclasses.replace(run.context, max_tokens=None)  # passes of micro windows
        _, loss, _ = accumulate_post_gradients(
            unbounded, run.data.train, batch, 3, micro, SentenceLoss(1.0, 1.0)
        )
        return loss.item(), [p.grad.clone() for p in run.model.parameters() if p.grad is not None]

    whole, in_one = gradients(micro=64)  # every window in one pass
    parts, in_parts = gradients(micro=2)  # the long post in checkpointed parts of 2 windows
    assert parts == pytest.approx(whole, rel=1e-5)
    for a, b in zip(in_one, in_parts, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("hard_negatives", [0.0, 0.7])
def test_under_max_pooling_a_step_trains_the_top_and_evidence_windows_at_the_exact_loss(
    tiny_roberta, long_posts, hard_negatives
):
    """Max pooling: only the windows holding a symptom's top sentence, taught evidence or a
    hard negative run with a graph, yet the loss is the one every window would give."""
    config = _config(
        tiny_roberta, long_posts, evidence_loss_weight=0.5, hard_negative_weight=hard_negatives
    )
    run = set_up(config)
    run.model.eval()
    train_split = run.data.train
    counts = np.diff(train_split.tokens.offsets)
    batch = [int(i) for i in np.flatnonzero(counts >= 4)[:3]]
    if hard_negatives:  # posts with a hard negative, so the term is there to compute
        batch = [i for i in np.flatnonzero(counts >= 4) if train_split.touched[i].any()][:3]
        assert len(batch) == 3
    _, loss, read = accumulate_post_gradients(
        run.context,
        train_split,
        batch,
        len(batch),
        64,
        SentenceLoss(0.5, hard_negatives),
        run.score_windows,
    )
    every = train_split.tokens.sequence_lengths[
        np.concatenate(
            [
                np.arange(train_split.tokens.offsets[i], train_split.tokens.offsets[i + 1])
                for i in batch
            ]
        )
    ].sum()
    assert read < every, "some windows ran without a graph"
    # by hand, from every window's scores
    scores = split_scores(run.model, train_split.tokens, run.collate, 64, run.device)
    expected = 0.0
    for post in batch:
        rows = scores.example_of == post
        logits = torch.logit(torch.from_numpy(scores.sentence_probs[rows]).clamp(1e-7, 1 - 1e-7))
        labels = torch.as_tensor(train_split.tokens.labels[post], dtype=torch.float32)
        expected += run.loss_fn(logits.max(0).values[None], labels[None]).item()
        evidence = torch.as_tensor(
            train_split.evidence[post][scores.sentence_of[rows]], dtype=torch.float32
        )
        share = (torch.softmax(logits, 0) * evidence).sum(0)
        taught = (labels > 0) & (evidence.sum(0) > 0)
        expected -= 0.5 * torch.log(share[taught]).sum().item()
        touched = torch.as_tensor(train_split.touched[post][scores.sentence_of[rows]])
        expected += hard_negatives * torch.nn.functional.softplus(logits)[touched > 0].sum().item()
    assert loss.item() == pytest.approx(expected / len(batch), rel=1e-4)


def test_the_sentence_loss_moves_a_posts_softmax_onto_its_evidence(tiny_roberta, long_posts):
    """One step with the sentence loss alone raises the evidence sentences' share; the train
    split's evidence is what it reads."""
    config = _config(tiny_roberta, long_posts, post_pooling="attention", learning_rate=1e-2)
    run = set_up(config)
    train_split = run.data.train
    taught = [
        i
        for i in range(len(train_split))
        if (train_split.evidence[i].any(0) & (train_split.tokens.labels[i] > 0)).any()
    ][:8]

    def evidence_share() -> float:
        scores = split_scores(run.model, dataclasses.replace(train_split.tokens), run.collate, 64,
                             run.device)  # fmt: skip
        posts, sentences, probs = scores.per_sentence()
        shares = []
        for post in taught:
            rows = posts == post
            logits = torch.logit(torch.from_numpy(probs[rows]).clamp(1e-6, 1 - 1e-6))
            weights = torch.softmax(logits, dim=0).numpy()
            evidence = train_split.evidence[post][sentences[rows]]
            for symptom in np.flatnonzero(train_split.tokens.labels[post]):
                if evidence[:, symptom].any():
                    shares.append(weights[evidence[:, symptom] > 0, symptom].sum())
        return float(np.mean(shares))

    before = evidence_share()
    run.model.train()
    for _ in range(3):
        sentence_loss_alone = dataclasses.replace(
            run.context, loss_fn=lambda logits, labels, mask=None: logits.sum() * 0.0
        )
        accumulate_post_gradients(
            sentence_loss_alone, train_split, taught, len(taught), 64, SentenceLoss(1.0)
        )
        run.optimizer.step()
        run.optimizer.zero_grad()
    assert evidence_share() > before + 0.05


def test_hard_negatives_score_the_sentences_that_touch_a_symptom_as_absent(
    tiny_roberta, long_posts
):
    """Steps of the hard-negative loss alone lower what the training posts' status-0 sentences
    score for the symptom they touch; the post's labels play no part."""
    config = _config(tiny_roberta, long_posts, post_pooling="attention", learning_rate=1e-2)
    run = set_up(config)
    train_split = run.data.train
    posts = [i for i in range(len(train_split)) if train_split.touched[i].any()][:8]
    assert posts, "the realistic sample has status-0 annotations"

    def touched_probability() -> float:
        scores = split_scores(run.model, train_split.tokens, run.collate, 64, run.device)
        at, sentences, probs = scores.per_sentence()
        return float(
            np.mean(
                [
                    probs[at == post][train_split.touched[post][sentences[at == post]] > 0].mean()
                    for post in posts
                ]
            )
        )

    before = touched_probability()
    run.model.train()
    hard_negatives_alone = dataclasses.replace(
        run.context, loss_fn=lambda logits, labels, mask=None: logits.sum() * 0.0
    )
    for _ in range(3):
        accumulate_post_gradients(
            hard_negatives_alone, train_split, posts, len(posts), 64, SentenceLoss(0.0, 1.0)
        )
        run.optimizer.step()
        run.optimizer.zero_grad()
    assert touched_probability() < before - 0.05


def test_validation_evidence_is_scored_never_trained_on(tiny_roberta, long_posts, tmp_path):
    """Moving every validation and test evidence annotation to another sentence of its post
    (labels, split and training posts unchanged) leaves training bit for bit the same."""
    moved = tmp_path / "moved"
    shutil.copytree(long_posts, moved)
    config = _config(tiny_roberta, long_posts, evidence_loss_weight=1.0, epochs=1)
    data = prepare_data(config)
    held_out = set(data.validation.post_ids) | set(data.test.post_ids)
    path = moved / "redsm5_annotations.csv"
    rows = list(csv.DictReader(path.open()))
    texts = {r["post_id"]: r["text"] for r in csv.DictReader((moved / "redsm5_posts.csv").open())}
    changed = 0
    for row in rows:
        if row["post_id"] in held_out and row["status"] == "1":
            others = [
                sentence.text
                for sentence in split_sentences(texts[row["post_id"]])
                if sentence.text not in row["sentence_text"]
            ]
            if others:
                row["sentence_text"], changed = others[0], changed + 1
    assert changed
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    first = train(config)
    second = train(dataclasses.replace(config, data_dir=str(moved)))
    same = {name: value for name, value in first.metrics.items() if "evidence" not in name}
    assert same == {name: second.metrics[name] for name in same}  # the same weights scored
    assert (
        first.metrics["evidence_average_precision"] != second.metrics["evidence_average_precision"]
    )  # scored on the moved evidence


def test_evidence_ranking_is_the_evidence_tasks_measure_over_the_same_candidates(
    tiny_roberta, long_posts
):
    config = _config(tiny_roberta, long_posts)
    run = set_up(config)
    validation = run.data.validation
    scores = split_scores(run.model, validation.tokens, run.collate, 64, run.device)
    ranking = evidence_ranking(validation, scores)
    # by hand: every sentence of every (post, symptom shown), scored by that symptom's column
    posts, sentences, probs = scores.per_sentence()
    labels, ranked, groups = [], [], []
    for post in range(len(validation)):
        for symptom in np.flatnonzero(validation.tokens.labels[post]):
            rows = posts == post
            labels += validation.evidence[post][sentences[rows], symptom].tolist()
            ranked += probs[rows, symptom].tolist()
            groups += [f"{post}|{symptom}"] * int(rows.sum())
    expected = evidence_metrics(np.array(labels), np.array(ranked), np.array(groups))
    assert ranking == {
        f"evidence_{name}": expected[name]
        for name in ("average_precision", "auroc", "recall_at_1", "recall_at_3")
    }
    assert len(scores.probs) == len(validation) and scores.probs.shape[1] == len(SYMPTOMS)


MIDDLE = "I lie awake every night and cannot sleep at all."
FILLER = (
    "I went to the market this morning and it was pretty crowded.",
    "My cat knocked a glass off the table again.",
    "The weather has been rainy and cold this week.",
    "I started watching a new show on the weekend.",
    "Our neighbours are renovating their kitchen.",
    "I need to renew my driving licence soon.",
    "The bus was late so I walked part of the way.",
)


def _middle_posts(folder: Path, posts: int, seed: int) -> Path:
    """Posts of 15 plain sentences; every other one states sleep trouble in its 8th, and only
    there: past any head_tail window of 48 tokens."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    with (
        (folder / "redsm5_posts.csv").open("w", newline="") as p,
        (folder / "redsm5_annotations.csv").open("w", newline="") as a,
    ):
        post_rows, note_rows = csv.writer(p), csv.writer(a)
        post_rows.writerow(["post_id", "text"])
        note_rows.writerow(
            ["post_id", "sentence_id", "sentence_text", "DSM5_symptom", "status", "explanation"]
        )
        for n in range(posts):
            sentences = [FILLER[i] for i in rng.integers(0, len(FILLER), 15)]
            if n % 2:
                sentences[7] = MIDDLE
                note_rows.writerow([f"p{n}", f"p{n}_7", MIDDLE, "SLEEP_ISSUES", 1, "insomnia"])
            post_rows.writerow([f"p{n}", " ".join(sentences)])
    return folder


@pytest.mark.slow
def test_a_symptom_stated_only_in_the_middle_of_a_long_post_is_found(tiny_roberta, tmp_path):
    """Issue #49: head_tail reads a long post's start and end; whole_post reads every sentence,
    so a post whose only evidence sits in its middle is found, and the sentence named."""
    from sklearn.metrics import roc_auc_score

    from hpo.predict import load_classifier as load_model

    train_on = _middle_posts(tmp_path / "train", 120, seed=0)
    fresh = _middle_posts(tmp_path / "fresh", 40, seed=1)
    texts = [row["text"] for row in csv.DictReader((fresh / "redsm5_posts.csv").open())]
    truth = np.arange(len(texts)) % 2
    sleep = SYMPTOMS.index("SLEEP_ISSUES")
    found = {}
    for name, formulation in {"whole_post": {}, "head_tail": {"long_text": "head_tail"}}.items():
        config = _config(
            tiny_roberta,
            train_on,
            epochs=6,
            criteria_formulation="multilabel" if formulation else "whole_post",
            evidence_loss_weight=0.0 if formulation else 1.0,
            class_weighting="balanced",
            checkpoint_dir=str(tmp_path / name),
            **formulation,
        )
        train(config)
        model = load_model(tmp_path / name, "cpu")
        assert model.settings.formulation == config.formulation
        found[name] = roc_auc_score(truth, model.predict(texts).probabilities[:, sleep])
    assert found["whole_post"] >= 0.95 and found["head_tail"] <= 0.75, found
    evidence = load_model(tmp_path / "whole_post", "cpu").predict_evidence(
        [t for t, positive in zip(texts, truth, strict=True) if positive],
        top_k=1,
        symptoms=[["SLEEP_ISSUES"]] * int(truth.sum()),
    )
    assert np.mean([post["SLEEP_ISSUES"][0].text == MIDDLE for post in evidence]) >= 0.9
