"""The joined prediction: a criteria model decides which symptoms a post shows, then an
evidence model ranks the post's sentences for each symptom found, and only for those.

    pair = load_pair("criteria/final/model", "evidence/final/model")
    post = pair.explain(["I can't sleep. Nothing is fun anymore."]).posts[0]
    post.findings["ANHEDONIA"].present, post.findings["ANHEDONIA"].evidence[0].start
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpo.explain.pair import check_pair
from hpo.predict import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_TOP_K,
    Predictor,
    Progress,
    ScoredSentence,
    load_classifier,
)

# A decision whose probability lies this close to its threshold is marked uncertain, so that
# 0.48 "absent" does not read as surely as 0.05 "absent" (in the demo a quarter of all
# probabilities fall within 0.1 of 0.5).
UNCERTAIN_MARGIN = 0.1


@dataclass(frozen=True)
class Finding:
    symptom: str
    probability: float  # the criteria model's
    present: bool  # probability >= threshold
    evidence: tuple[
        ScoredSentence, ...
    ]  # the top-k sentences when present; never scored (empty) otherwise
    threshold: float  # the criteria model's decision threshold for the symptom

    @property
    def uncertain(self) -> bool:
        """Decided within UNCERTAIN_MARGIN of the threshold: 0.48 absent and 0.53 present
        are the same call made twice."""
        return abs(self.probability - self.threshold) <= UNCERTAIN_MARGIN


@dataclass(frozen=True)
class Explanation:
    findings: dict[str, Finding]  # every symptom, in the criteria model's label order

    @property
    def present(self) -> list[str]:
        return [symptom for symptom, finding in self.findings.items() if finding.present]


@dataclass(frozen=True)
class Explanations:
    posts: list[Explanation]  # in input order
    criteria_seconds: float  # each half's share of the time, for throughput figures
    evidence_seconds: float


@dataclass(frozen=True)
class Pair:
    criteria: Predictor
    evidence: Predictor
    # None: both recorded the same training data; else why it was not checked
    unchecked_data: str | None = None

    def explain(
        self,
        texts: Sequence[str],
        top_k: int | None = DEFAULT_TOP_K,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: Callable[[str], Progress] | None = None,
    ) -> Explanations:
        """Per text, every symptom's probability and decision and, for those present, the
        ``top_k`` sentences (None: all) by evidence score. ``progress(half)`` gives the counter
        of the posts through each half, "criteria" then "evidence", as that half starts: each
        counts every post once."""
        counter = progress or (lambda half: None)
        started = time.perf_counter()
        decided = self.criteria.predict(texts, batch_size, counter("criteria"))
        found = [
            [label for label, present in zip(decided.labels, row, strict=True) if present]
            for row in decided.decisions
        ]
        scored = time.perf_counter()
        evidence = self.evidence.predict_evidence(
            texts, top_k, batch_size, counter("evidence"), symptoms=found
        )
        done = time.perf_counter()
        thresholds = self.criteria.settings.thresholds
        posts = [
            Explanation(
                {
                    label: Finding(
                        label,
                        float(probability),
                        bool(present),
                        tuple(top.get(label, ())),
                        float(thresholds[label]),
                    )
                    for label, probability, present in zip(
                        decided.labels, probabilities, decisions, strict=True
                    )
                }
            )
            for probabilities, decisions, top in zip(
                decided.probabilities, decided.decisions, evidence, strict=True
            )
        ]
        return Explanations(posts, scored - started, done - scored)


def load_pair(
    criteria_dir: str | Path, evidence_dir: str | Path | None, device: str = "auto"
) -> Pair:
    """The criteria and evidence models, checked to fit together (``check_pair``: same data,
    same criterion texts) before either is loaded. ``evidence_dir`` None: a whole_post criteria
    model, which ranks its posts' sentences itself, is both."""
    if evidence_dir is None:
        criteria = load_classifier(criteria_dir, device)
        return Pair(criteria, criteria)
    note = check_pair(criteria_dir, evidence_dir)
    return Pair(load_classifier(criteria_dir, device), load_classifier(evidence_dir, device), note)
