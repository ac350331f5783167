"""A training step over long posts: the chunk-selecting step gives max-pooling's gradient,
while no forward pass ever holds more than its budget of sequences, however many chunks a
post has; the host-memory ceiling turns a step that would grow past it into an
out-of-memory the loop backs off from."""

from __future__ import annotations

import functools
from contextlib import nullcontext

import numpy as np
import pytest
import torch

from hpo.data.collate import Collator
from hpo.data.tokenize import tokenize_pairs
from hpo.errors import OutOfMemoryError
from hpo.fixtures import corpus_sentences
from hpo.models.classifier import EncoderClassifier, build_classifier
from hpo.models.device import forward_keys
from hpo.models.settings import HeadConfig
from hpo.models.tokenizer import load_tokenizer
from hpo.train import memory
from hpo.train.evaluate import sequence_logits, split_probabilities
from hpo.train.losses import bce_loss
from hpo.train.step import StepContext, accumulate_gradients, plan_units

LABELS = 9
CPU = torch.device("cpu")
MAX_LENGTH = 32


@pytest.fixture(scope="module")
def long_posts(tiny_roberta):
    """Posts of 1 to 40+ chunks at max_length 32, with multi-label targets."""
    tokenizer = load_tokenizer(tiny_roberta)
    sentences = corpus_sentences()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(sentences, size=n)) for n in (1, 3, 60, 2, 140, 5)]
    labels = rng.integers(0, 2, size=(len(texts), LABELS))
    tokens = tokenize_pairs(
        tokenizer,
        [(None, t) for t in texts],
        labels,
        MAX_LENGTH,
        cache_key=None,
        long_text="chunks",
    )
    chunks = np.diff(tokens.offsets)
    assert chunks.max() >= 40 and chunks.min() == 1, chunks
    return tokenizer, tokens


def _model(encoder):
    torch.manual_seed(0)
    model = build_classifier(
        "criteria",
        encoder,
        HeadConfig(pooling="mean", dropout=0.0, num_labels=LABELS),
        encoder_dropout=0.0,
    )
    return model.train()


class _Forwards:
    """Rows of every forward pass, split by whether autograd kept a graph for it."""

    def __init__(self):
        self.with_graph, self.without_graph = [], []
        self.handle = torch.nn.modules.module.register_module_forward_hook(self._seen)

    def _seen(self, module, args, output):
        if isinstance(module, EncoderClassifier):
            (self.with_graph if output.requires_grad else self.without_graph).append(
                output.shape[0]
            )


def _full_max_pool_gradient(model, tokens, batch, collate, loss_fn):
    """The reference: every chunk of every post in one graph, logits max-pooled per post."""
    model.zero_grad()
    features, counts = tokens.sequences(batch)
    logits = model(**collate(features))
    pooled = torch.stack([chunk.amax(0) for chunk in logits.split(counts)])
    labels = torch.as_tensor(tokens.labels[batch], dtype=torch.float32)
    (loss_fn(pooled, labels) / len(batch)).backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.slow
def test_chunk_step_gives_max_poolings_gradient_within_its_sequence_budget(
    tiny_roberta, long_posts
):
    tokenizer, tokens = long_posts
    model = _model(tiny_roberta)
    collate = Collator(tokenizer.pad_token_id, keep_keys=forward_keys(model))
    loss_fn = functools.partial(bce_loss, pos_weight=torch.full((LABELS,), 2.0))
    batch = list(range(len(tokens)))
    want = _full_max_pool_gradient(model, tokens, batch, collate, loss_fn)
    n_sequences = len(tokens.input_ids)

    model.zero_grad()
    forwards = _Forwards()
    try:
        units = plan_units(
            tokens, batch, LABELS, lambda ids: sequence_logits(model, tokens, ids, collate, 8, CPU)
        )
        micro, loss = accumulate_gradients(
            StepContext(
                model, collate, loss_fn, nullcontext, None, torch.optim.SGD(model.parameters()), CPU
            ),
            tokens,
            units,
            len(batch),
            4,
        )
    finally:
        forwards.handle.remove()
    got = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}

    assert micro == 4 and loss.item() > 0
    assert max(forwards.with_graph) <= 4, (
        "a backward pass holds the micro-batch's sequences at most"
    )
    assert max(forwards.without_graph) <= 8, "chunks are scored in bounded batches"
    assert sum(forwards.with_graph) == len(units) <= len(batch) * LABELS < n_sequences
    assert units.masks.sum() == len(batch) * LABELS, (
        "every post's every label is trained exactly once"
    )
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-6, msg=name)


def test_prediction_streams_chunks_in_bounded_batches_and_max_pools(tiny_roberta, long_posts):
    tokenizer, tokens = long_posts
    model = _model(tiny_roberta).eval()
    collate = Collator(tokenizer.pad_token_id, keep_keys=forward_keys(model))
    forwards = _Forwards()
    try:
        probs = split_probabilities(model, tokens, collate, 8, CPU)
    finally:
        forwards.handle.remove()
    assert max(forwards.without_graph) <= 8 and not forwards.with_graph
    with torch.no_grad():
        for example in range(len(tokens)):
            features, _ = tokens.sequences([example])
            want = torch.sigmoid(model(**collate(features)).amax(0)).numpy()
            np.testing.assert_allclose(probs[example], want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_crossing_the_host_memory_ceiling_backs_off_then_fails_the_step(tiny_roberta, long_posts):
    tokenizer, tokens = long_posts
    model = _model(tiny_roberta)
    collate = Collator(tokenizer.pad_token_id, keep_keys=forward_keys(model))
    units = plan_units(
        tokens,
        [0, 1, 3, 5],
        LABELS,
        lambda ids: sequence_logits(model, tokens, ids, collate, 8, CPU),
    )
    optimizer = torch.optim.SGD(model.parameters())
    context = StepContext(model, collate, bce_loss, nullcontext, None, optimizer, CPU)
    resident = memory.resident_mb()
    assert resident is not None, "Linux: /proc/self/statm is readable"
    memory.set_memory_ceiling(resident / 4)  # already past it: every pass must fail
    try:
        with pytest.raises(
            OutOfMemoryError,
            match=r"even at micro-batch 1 .*host-memory ceiling.*--memory-per-worker",
        ):
            accumulate_gradients(context, tokens, units, 4, 4)
        memory.set_memory_ceiling(resident * 4)  # far above: the same step runs
        assert accumulate_gradients(context, tokens, units, 4, 4)[0] == 4
    finally:
        memory.set_memory_ceiling(None)


def test_a_token_budget_caps_every_forward_pass_and_keeps_the_gradient(tiny_roberta, long_posts):
    tokenizer, tokens = long_posts
    model = _model(tiny_roberta)
    collate = Collator(tokenizer.pad_token_id, keep_keys=forward_keys(model))
    batch = list(range(len(tokens)))
    units = plan_units(
        tokens, batch, LABELS, lambda ids: sequence_logits(model, tokens, ids, collate, 8, CPU)
    )
    gradients = []
    for max_tokens in (None, 2 * MAX_LENGTH):
        model.zero_grad()
        forwards = _Forwards()
        try:
            accumulate_gradients(
                StepContext(
                    model,
                    collate,
                    bce_loss,
                    nullcontext,
                    None,
                    torch.optim.SGD(model.parameters()),
                    CPU,
                    max_tokens,
                ),
                tokens,
                units,
                len(batch),
                16,
            )
        finally:
            forwards.handle.remove()
        gradients.append(
            {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        )
        assert max(forwards.with_graph) == (16 if max_tokens is None else 2)
    for name, want in gradients[0].items():
        torch.testing.assert_close(gradients[1][name], want, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("formulation", ["multilabel", "pairs"])
def test_a_hard_negatives_loss_weighs_one_plus_its_weight(tiny_roberta, tmp_path, formulation):
    """A symptom a post touches without showing it (status 0 alone) weighs 1 + w in the step's
    loss, every other post-symptom cell 1: the loss is the hand-weighted sum."""
    from hpo.fixtures import write_sample
    from hpo.train.config import TrainConfig
    from hpo.train.formulations import formulation_of
    from hpo.train.setup import set_up

    sample_dir = write_sample(tmp_path, posts=60, seed=3)
    config = TrainConfig(
        task="criteria",
        criteria_formulation=formulation,
        encoder=str(tiny_roberta),
        data_dir=str(sample_dir),
        max_length=64,
        batch_size=8,
        mixed_precision="no",
        hard_negative_weight=2.0,
    )
    run = set_up(config)
    touched = run.data.train.hard_negatives
    assert touched.any() and np.array_equal(run.label_weights, 1 + 2.0 * touched)
    run.model.eval()  # no dropout: the step and the hand computation see one function
    batch = [int(i) for i in np.flatnonzero(touched.any(axis=1))[:4]]
    _, loss, _ = formulation_of(formulation).accumulate(run, batch)
    tokens = run.data.train.tokens
    with torch.no_grad():
        logits = run.model(**run.collate(tokens.features(np.array(batch))))
    labels = torch.as_tensor(tokens.labels[batch], dtype=torch.float32).reshape(len(batch), -1)
    weights = torch.as_tensor(run.label_weights[batch])
    expected = run.loss_fn(logits, labels, mask=weights) / len(batch)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-4)
    assert expected.item() > run.loss_fn(logits, labels).item() / len(batch), "it weighs more"
