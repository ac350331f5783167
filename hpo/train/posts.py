"""whole_post: posts read sentence by sentence, trained and scored as whole posts.

A post is one or more windows of whole sentences (``hpo.data.windows``); the model scores each
sentence for the nine symptoms and the post's sentences pool into its score
(``hpo.models.pooling``). Under ``max`` pooling without the sentence loss the gradient reaches
one sentence per symptom, and training goes the ``chunks`` way (``hpo.train.step``: windows
scored without a graph, each symptom's best window trained). Otherwise every sentence learns,
so a step here runs whole posts: as many as fit one forward pass together, and a post longer
than a pass in parts under activation checkpointing (``torch.utils.checkpoint``), which keeps
only each part's sentence scores and recomputes its activations in the backward pass. The
gradient is exact and a step's memory is one pass's, however long the post: a 45-window post
costs one more forward pass of its windows (but its last part's), not 45 windows of activations.

The sentence loss (``evidence_loss_weight``) teaches where a symptom is stated: for each
symptom a training post shows and has evidence sentences for, the softmax of its sentences'
logits should put its mass on them (cross-entropy against "one of these"). Its hard negatives
(``hard_negative_weight``) teach where a symptom is touched but not shown: each sentence a
clinician marked so (status 0) is scored as absent (binary cross-entropy toward 0 on its own
logit), the false positives a max over a post's sentences would otherwise make of them. Only the
split being trained supplies either: validation and test posts' sentences are scored, never
trained on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.functional import softplus
from torch.utils.checkpoint import checkpoint

from hpo.data.tokenized import TokenizedSplit
from hpo.models.device import unwrap_model
from hpo.models.pooling import pool_posts, sentence_weights
from hpo.train.memory import guard_host_memory
from hpo.train.metrics import evidence_metrics
from hpo.train.prepared import PreparedSplit
from hpo.train.step import StepContext, passes_of, with_backoff

EVIDENCE_METRICS = ("average_precision", "auroc", "recall_at_1", "recall_at_3")
EVIDENCE_PREFIX = "evidence_"  # whole_post's sentence ranking, beside the post metrics


@dataclass(frozen=True)
class PostScores:
    """A split's posts and sentences as a whole_post model scores them."""

    probs: np.ndarray  # (posts, labels): the pooled probability per post and symptom
    sentence_probs: np.ndarray  # (rows, labels): per sentence row (a cut sentence has several)
    example_of: np.ndarray  # (rows,): the post of each row
    sentence_of: np.ndarray  # (rows,): which of its post's sentences it is

    def per_sentence(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One row per (post, sentence): a cut sentence scores as its best piece. Rows run in
        post order, sentences ascending, so a cut sentence's pieces are neighbours."""
        new = np.r_[
            True,
            (self.example_of[1:] != self.example_of[:-1])
            | (self.sentence_of[1:] != self.sentence_of[:-1]),
        ]
        starts = np.flatnonzero(new)
        return (
            self.example_of[starts],
            self.sentence_of[starts],
            np.maximum.reduceat(self.sentence_probs, starts, axis=0),
        )


def pooled(rows: torch.Tensor, example_of: torch.Tensor, n_posts: int, head) -> torch.Tensor:
    """Per post and label, its sentence rows' logits pooled as the model's head says."""
    labels = head.num_labels
    gates = rows[:, labels:] if head.post_pooling == "attention" else None
    return pool_posts(rows[:, :labels], example_of, n_posts, head.post_pooling, gates)


def flat_rows(outputs, counts) -> torch.Tensor | np.ndarray:
    """(sequences, rows, outputs) to the sentence rows that exist, in order: a sequence's
    first ``counts`` rows."""
    width = outputs.shape[1]
    if isinstance(outputs, np.ndarray):
        return outputs[np.arange(width)[None, :] < np.asarray(counts)[:, None]]
    keep = (
        torch.arange(width, device=outputs.device)[None, :]
        < torch.as_tensor(counts, device=outputs.device)[:, None]
    )
    return outputs[keep]


def score_posts(model, tokens: TokenizedSplit, sentence_outputs) -> PostScores:
    """``sentence_outputs(sequence_ids)``: the model's per-sentence outputs of every window
    (sequences, rows, outputs), scored without a graph (``evaluate.sequence_logits``)."""
    head = unwrap_model(model).head_config
    sequences = np.arange(len(tokens.input_ids))
    rows = flat_rows(sentence_outputs(sequences), tokens.sentences_per_sequence)
    example_of, sentence_of = tokens.sentence_rows(sequences)
    logits = pooled(torch.from_numpy(rows), torch.from_numpy(example_of), len(tokens), head)
    return PostScores(
        torch.sigmoid(logits).numpy().astype(np.float64),
        torch.sigmoid(torch.from_numpy(rows[:, : head.num_labels])).numpy().astype(np.float64),
        example_of,
        sentence_of,
    )


def evidence_ranking(split: PreparedSplit, scores) -> dict[str, float]:
    """How well a whole_post model's sentence scores (``PostScores``) find the evidence, as the
    evidence task measures it: per (post, symptom) the post shows, all its sentences ranked by
    that symptom's score (its average precision over them all, AUROC, and recall@1/@3 per
    pair). ``evidence_`` names; nothing for another model's scores."""
    if split.evidence is None or not isinstance(scores, PostScores):
        return {}
    posts, sentences, probs = scores.per_sentence()
    labels, ranked, groups = [], [], []
    truth = split.tokens.labels
    for post in range(len(split)):
        rows = posts == post
        evidence = split.evidence[post][sentences[rows]]
        for symptom in np.flatnonzero(truth[post]):
            labels.append(evidence[:, symptom])
            ranked.append(probs[rows, symptom])
            groups.append(np.full(int(rows.sum()), post * truth.shape[1] + symptom))
    if not labels or not np.concatenate(labels).any():
        return {}
    found = evidence_metrics(np.concatenate(labels), np.concatenate(ranked), np.concatenate(groups))
    return {EVIDENCE_PREFIX + name: found[name] for name in EVIDENCE_METRICS}


@dataclass(frozen=True)
class SentenceLoss:
    """The weights of what a step teaches a post's sentences besides the post's labels."""

    evidence: float = 0.0  # evidence_loss_weight: where a symptom shown is stated
    hard_negatives: float = 0.0  # hard_negative_weight: where one is touched but not shown


@dataclass(frozen=True)
class _Plan:
    """What a step trains of one post: the windows it runs with a graph, and the scores of its
    other sentences (no graph, eval mode), which only the sentence loss's softmax reads."""

    post: int
    windows: np.ndarray
    fixed: np.ndarray | None = None  # (rows, outputs)
    fixed_sentences: np.ndarray | None = None  # which of the post's sentences those rows are


def accumulate_post_gradients(
    context: StepContext,
    split: PreparedSplit,
    batch: list[int],
    n_examples: int,
    micro: int,
    sentence_loss: SentenceLoss,
    score_windows=None,
) -> tuple[int, torch.Tensor, int]:
    """Forward and backward over ``batch``'s posts: each post's planned windows (``_plan``;
    ``score_windows(sequence_ids)``: their sentence outputs without a graph, as
    ``evaluate.sequence_logits`` gives them), posts together in passes of ``micro`` sequences
    (and ``context.max_tokens`` tokens) at most, a post of more in checkpointed parts of that
    size. Returns the micro-batch that worked, the step's loss (a tensor) and the tokens the
    passes with a graph read. The loss is divided by the step's examples, as
    ``accumulate_gradients``'s."""
    model, device, scaler = context.model, context.device, context.scaler
    tokens, head = split.tokens, unwrap_model(model).head_config
    plans = _plan(split, batch, head, sentence_loss, score_windows)
    trained = np.concatenate([plan.windows for plan in plans])
    longest = int(tokens.sequence_lengths[trained].max())

    def forward(sequences: np.ndarray) -> torch.Tensor:
        inputs = {
            k: v.to(device, non_blocking=True)
            for k, v in context.collate(tokens.features(sequences)).items()
        }
        with context.autocast():
            return flat_rows(model(**inputs), tokens.sentences_per_sequence[sequences]).float()

    def attempt(size: int) -> torch.Tensor:
        total = torch.zeros((), device=device)
        for group in _passes(plans, size):
            sequences = np.concatenate([plan.windows for plan in group])
            with guard_host_memory():
                if len(sequences) <= size:
                    rows = forward(sequences)
                else:  # one long post: a part's activations live only inside its backward
                    # but the last part's: made last, its backward runs first, so they are the
                    # only ones alive then and it needs no second forward pass. A full pass, so
                    # the fewest windows run twice (5 windows in passes of 4: 1, not 4)
                    cut = len(sequences) - size
                    parts = [sequences[at : min(at + size, cut)] for at in range(0, cut, size)]
                    rows = torch.cat(
                        [checkpoint(forward, part, use_reentrant=False) for part in parts]
                        + [forward(sequences[cut:])]
                    )
                loss = _post_loss(
                    split, group, sequences, rows, head, context.loss_fn, sentence_loss
                )
                loss = loss / n_examples
                (scaler.scale(loss) if scaler else loss).backward()
            total += loss.detach()
            del rows, loss
        return total

    micro, loss = with_backoff(
        attempt, micro, context.optimizer, device, passes_of(micro, context.max_tokens, longest)
    )
    return micro, loss, int(tokens.sequence_lengths[trained].sum())


def _plan(
    split: PreparedSplit, batch, head, sentence_loss: SentenceLoss, score_windows
) -> list[_Plan]:
    """Which windows of each post a step runs with a graph. A smooth pooling sends gradient to
    every sentence: all of them. Under max pooling a symptom's gradient reaches its top sentence
    alone, so only the windows holding a top sentence (found by ``score_windows``, without a
    graph) train, as ``chunks`` trains each label's winning chunk; the sentence loss adds the
    windows holding the evidence it teaches (and its hard negatives, those holding them), and its
    softmax also reads the other sentences' scores, as constants (their gradient, each in
    proportion to its small share, is left out)."""
    tokens, evidence = split.tokens, split.evidence
    plans = [_Plan(int(post), _windows(tokens, post)) for post in batch]
    several = [plan.post for plan in plans if len(plan.windows) > 1]
    if head.post_pooling != "max" or not several:
        return plans
    sequences = np.concatenate([_windows(tokens, post) for post in several])
    counts = tokens.sentences_per_sequence[sequences]
    rows = flat_rows(score_windows(sequences), counts)
    posts, sentences = tokens.sentence_rows(sequences)
    window_of = np.repeat(sequences, counts)
    for index, plan in enumerate(plans):
        if len(plan.windows) == 1:
            continue
        mine = posts == plan.post
        logits = rows[mine, : head.num_labels]
        chosen = set(window_of[mine][logits.argmax(axis=0)].tolist())
        fixed = fixed_sentences = None
        if sentence_loss.hard_negatives:
            holds = split.touched[plan.post][sentences[mine]].any(axis=1)
            chosen |= set(window_of[mine][holds].tolist())
        if sentence_loss.evidence:
            taught = (tokens.labels[plan.post] > 0) & evidence[plan.post].any(axis=0)
            holds = evidence[plan.post][sentences[mine]][:, taught].any(axis=1)
            chosen |= set(window_of[mine][holds].tolist())
            rest = ~np.isin(window_of[mine], list(chosen))
            fixed, fixed_sentences = rows[mine][rest], sentences[mine][rest]
        plans[index] = _Plan(plan.post, np.array(sorted(chosen)), fixed, fixed_sentences)
    return plans


def _post_loss(
    split: PreparedSplit,
    group: list[_Plan],
    sequences: np.ndarray,
    rows: torch.Tensor,
    head,
    loss_fn,
    sentence_loss: SentenceLoss,
) -> torch.Tensor:
    """The posts' loss on their pooled scores (the rows with a graph: under max pooling they
    hold each symptom's top sentence), plus the weighted sentence losses."""
    device = rows.device
    posts = np.array([plan.post for plan in group])
    example_of, sentence_of = split.tokens.sentence_rows(sequences)
    local = np.searchsorted(posts, example_of)
    labels = torch.as_tensor(split.tokens.labels[posts], dtype=torch.float32, device=device)
    loss = loss_fn(pooled(rows, torch.as_tensor(local, device=device), len(posts), head), labels)
    if sentence_loss.hard_negatives:  # each hard negative's own logit, toward absent
        touched = torch.as_tensor(_per_row(split.touched, posts, local, sentence_of), device=device)
        logits = rows[:, : head.num_labels]
        loss = loss + sentence_loss.hard_negatives * (softplus(logits) * touched).sum()
    if sentence_loss.evidence:
        loss = loss + sentence_loss.evidence * _evidence_loss(
            split, group, posts, rows, local, sentence_of, labels, head
        )
    return loss


def _evidence_loss(split, group, posts, rows, local, sentence_of, labels, head) -> torch.Tensor:
    """Per post and symptom it shows with evidence sentences, -log of its sentence softmax's
    share on them, summed; the other sentences of a post under max pooling enter as the
    constant scores its plan holds."""
    device = rows.device
    fixed = [
        (i, plan) for i, plan in enumerate(group) if plan.fixed is not None and len(plan.fixed)
    ]
    if fixed:
        rows = torch.cat([rows, *(torch.as_tensor(plan.fixed, device=device) for _, plan in fixed)])
        local = np.concatenate([local, *(np.full(len(plan.fixed), i) for i, plan in fixed)])
        sentence_of = np.concatenate([sentence_of, *(plan.fixed_sentences for _, plan in fixed)])
    evidence = torch.as_tensor(_per_row(split.evidence, posts, local, sentence_of), device=device)
    local = torch.as_tensor(local, device=device)
    # per post and symptom, the share of its sentence softmax on its evidence sentences
    weights = sentence_weights(rows[:, : head.num_labels], local, len(posts))
    on_evidence = torch.zeros_like(labels).index_add(0, local, weights * evidence)
    taught = (labels > 0) & (torch.zeros_like(labels).index_add(0, local, evidence) > 0)
    return -torch.log(on_evidence[taught].clamp(min=1e-12)).sum()


def _per_row(marks, posts: np.ndarray, local: np.ndarray, sentence_of: np.ndarray) -> np.ndarray:
    """A split's per-sentence marks (``evidence`` or ``touched``) for each row: row r is
    sentence ``sentence_of[r]`` of post ``posts[local[r]]``."""
    found = np.zeros((len(local), marks[posts[0]].shape[1]), np.float32)
    for i, post in enumerate(posts):
        mine = local == i
        found[mine] = marks[post][sentence_of[mine]]
    return found


def _windows(tokens, example: int) -> np.ndarray:
    return np.arange(tokens.offsets[example], tokens.offsets[example + 1])


def _passes(plans: list[_Plan], size: int) -> list[list[_Plan]]:
    """The posts' plans, sorted by post (for ``searchsorted``) and grouped in order into passes
    of at most ``size`` windows; a post of more is a pass of its own."""
    passes, current, held = [], [], 0
    for plan in sorted(plans, key=lambda plan: plan.post):
        if current and held + len(plan.windows) > size:
            passes.append(current)
            current, held = [], 0
        current.append(plan)
        held += len(plan.windows)
    if current:
        passes.append(current)
    return passes
