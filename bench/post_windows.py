"""Which positive (post, symptom) pairs head_tail's window cannot see: the pairs none of whose
evidence sentences lies wholly inside it, the share of posts longer than it, and a model's recall
on each side (bench/whole_post.py's question, bench/lexical_baselines.py's calibration facts).
"""

from __future__ import annotations

import numpy as np


def window_recall(split, probs, data: str, encoder: str, max_length: int) -> tuple[dict, dict]:
    """Recall at 0.5 on the positive (post, symptom) pairs of ``split`` none of whose evidence
    sentences lies wholly inside head_tail's window (the first quarter and last three quarters
    of ``max_length``'s text budget), and on the pairs with one inside."""
    outside = window_facts(data, encoder, max_length, set(split.post_ids))["outside"]
    rows = {post: row for row, post in enumerate(split.post_ids)}
    truth = split.tokens.labels
    found = {True: [], False: []}
    from hpo.data import SYMPTOMS

    for post, row in rows.items():
        for column, symptom in enumerate(SYMPTOMS):
            if truth[row, column] and (post, symptom) in outside["evidenced"]:
                found[(post, symptom) in outside["pairs"]].append(probs[row, column] >= 0.5)
    return (
        {"recall": round(float(np.mean(found[True])), 4), "pairs": len(found[True])},
        {"recall": round(float(np.mean(found[False])), 4), "pairs": len(found[False])},
    )


def window_facts(data: str, encoder: str, max_length: int, posts: set | None = None) -> dict:
    """Which positive (post, symptom) pairs have no evidence sentence wholly inside head_tail's
    window, and the share of posts longer than it, in the encoder's tokens (issue #49's two
    facts: 29.6% and 13.8% on the realistic sample at 256 MiniLM tokens)."""
    from hpo.data import load_redsm5
    from hpo.data.sentences import covered, locate, split_sentences
    from hpo.data.tokenize import HEAD_SHARE
    from hpo.models.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(encoder)
    corpus = load_redsm5(data)
    budget = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    head = int(budget * HEAD_SHARE)
    evidenced, pairs, longer, total = set(), set(), 0, 0
    rows_of: dict[str, list] = {}
    for a in corpus.annotations:
        if a.status == 1:
            rows_of.setdefault(a.post_id, []).append(a)
    for post in corpus.posts.values():
        if posts is not None and post.post_id not in posts:
            continue
        total += 1
        spans = tokenizer(
            post.text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        starts = np.array([start for start, _ in spans["offset_mapping"]])
        n = len(starts)
        longer += n > budget
        seen = (
            np.ones(n, bool)
            if n <= budget
            else np.r_[
                np.ones(head, bool), np.zeros(n - budget, bool), np.ones(budget - head, bool)
            ]
        )
        sentences = split_sentences(post.text)
        inside: dict[str, bool] = {}
        for a in rows_of.get(post.post_id, []):
            span = locate(post.text, a.sentence_text)
            for i in covered(sentences, span) if span else []:
                tokens = (starts >= sentences[i].start) & (starts < sentences[i].end)
                inside[a.symptom] = inside.get(a.symptom, False) or bool(seen[tokens].all())
        for symptom, any_inside in inside.items():
            evidenced.add((post.post_id, symptom))
            if not any_inside:
                pairs.add((post.post_id, symptom))
    return {
        "outside": {"evidenced": evidenced, "pairs": pairs},
        "posts_over_window": round(longer / max(total, 1), 4),
        "positive_pairs_outside_window": round(len(pairs) / max(len(evidenced), 1), 4),
        "evidenced_pairs": len(evidenced),
    }
