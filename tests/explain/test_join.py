"""The joined prediction, model by model: the criteria model decides each symptom, the
evidence model ranks sentences for the found ones only, and a decision near its threshold is
uncertain (untrained tiny models, thresholds that fix what is found)."""

from __future__ import annotations

import pytest

from hpo.data import SYMPTOMS
from hpo.explain import Finding, load_pair
from tests.support.untrained_models import save_untrained

# 0 finds a symptom whatever the weights, 1 never does (a sigmoid stays below 1)
FOUND = ("FATIGUE", "ANHEDONIA")
THRESHOLDS = {s: (0.0 if s in FOUND else 1.0) for s in SYMPTOMS}
POSTS = [
    "I can't sleep. I'm tired all day. Nothing is fun. I eat fine.",
    "Work was fine today. I saw a friend.",
]


@pytest.fixture(scope="module")
def pair(tiny_roberta, tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    criteria = save_untrained(tiny_roberta, root / "criteria", "criteria", THRESHOLDS)
    evidence = save_untrained(tiny_roberta, root / "evidence", "evidence", THRESHOLDS)
    return load_pair(criteria, evidence, device="cpu")


def test_a_pair_of_one_studys_models_is_checked_and_loaded(pair):
    assert (pair.criteria.task, pair.evidence.task) == ("criteria", "evidence")
    assert pair.unchecked_data is None  # both recorded the same data


def test_only_the_found_symptoms_get_sentences_and_every_one_is_a_span_of_its_post(pair):
    explained = pair.explain(POSTS, top_k=2)
    assert len(explained.posts) == 2
    assert explained.criteria_seconds >= 0 and explained.evidence_seconds >= 0
    for text, post in zip(POSTS, explained.posts, strict=True):
        assert list(post.findings) == list(SYMPTOMS) and post.present == list(
            s for s in SYMPTOMS if s in FOUND
        )
        for symptom, finding in post.findings.items():
            assert finding.threshold == THRESHOLDS[symptom]
            if symptom in FOUND:
                assert [s.rank for s in finding.evidence] == [1, 2]
                assert all(text[s.start : s.end] == s.text for s in finding.evidence)
            else:
                assert not finding.present and finding.evidence == ()


def test_each_half_counts_every_post_once(pair):
    counted: dict[str, int] = {}

    def counter(half: str):
        counted[half] = 0
        return lambda n: counted.__setitem__(half, counted[half] + n)

    pair.explain(POSTS, progress=counter)
    assert counted == {"criteria": 2, "evidence": 2}


@pytest.mark.parametrize(
    ("probability", "threshold", "uncertain"),
    [
        (0.48, 0.5, True),
        (0.53, 0.5, True),
        (0.6, 0.5, True),
        (0.9, 0.62, False),
        (0.05, 0.5, False),
    ],
)
def test_a_decision_within_a_tenth_of_its_threshold_is_uncertain(probability, threshold, uncertain):
    finding = Finding("FATIGUE", probability, probability >= threshold, (), threshold)
    assert finding.uncertain is uncertain
