"""A loaded classifier as a Predictor: probabilities decided at the saved thresholds, the same
whatever the batching, sentences ranked per symptom, and an ensemble's mean of its members
(untrained tiny models: what is checked holds for any weights)."""

from __future__ import annotations

import numpy as np
import pytest

from hpo.data import SYMPTOMS
from hpo.errors import UsageError
from hpo.models.ensemble_file import write_ensemble
from hpo.predict import load_classifier
from tests.support.untrained_models import save_untrained

THRESHOLDS = dict.fromkeys(SYMPTOMS, 0.5) | {"FATIGUE": 0.3, "ANHEDONIA": 0.7}
TEXTS = [
    "I can't sleep and I'm exhausted all day.",
    "Nothing is fun anymore. " * 40,  # longer than max_length: read in chunks
    "A normal day at work.",
]


@pytest.fixture(scope="module")
def models(tiny_roberta, tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {
        "criteria": save_untrained(tiny_roberta, root / "criteria", "criteria", THRESHOLDS),
        "other": save_untrained(tiny_roberta, root / "other", "criteria", THRESHOLDS, seed=1),
        "evidence": save_untrained(tiny_roberta, root / "evidence", "evidence", THRESHOLDS),
    }


def test_probabilities_are_decided_at_the_saved_thresholds(models):
    predictor = load_classifier(models["criteria"], device="cpu")
    predicted = predictor.predict(TEXTS)
    assert predicted.labels == tuple(SYMPTOMS) and predicted.probabilities.shape == (3, 9)
    assert ((predicted.probabilities >= 0) & (predicted.probabilities <= 1)).all()
    thresholds = np.array([THRESHOLDS[s] for s in SYMPTOMS])
    assert np.array_equal(predicted.decisions, predicted.probabilities >= thresholds)
    assert predictor.predict([]).probabilities.shape == (0, 9)


def test_the_batching_changes_no_probability(models):
    predictor = load_classifier(models["criteria"], device="cpu")
    one = predictor.predict(TEXTS, batch_size=1).probabilities
    np.testing.assert_allclose(
        predictor.predict(TEXTS, batch_size=16).probabilities, one, atol=1e-5
    )
    np.testing.assert_allclose(predictor.predict(TEXTS[::-1]).probabilities, one[::-1], atol=1e-5)


def test_one_string_or_the_other_tasks_call_is_refused(models):
    criteria = load_classifier(models["criteria"], device="cpu")
    evidence = load_classifier(models["evidence"], device="cpu")
    with pytest.raises(TypeError, match="not one string"):
        criteria.predict(TEXTS[0])
    with pytest.raises(UsageError, match=r"this is a criteria model; call predict\(\) instead"):
        criteria.predict_evidence(TEXTS)
    with pytest.raises(UsageError, match=r"this is a evidence model; call predict_evidence\(\)"):
        evidence.predict(TEXTS)


def test_each_symptoms_sentences_come_ranked_by_score_as_spans_of_the_post(models):
    evidence = load_classifier(models["evidence"], device="cpu")
    post = "I can't sleep. I'm tired all day. Nothing is fun. I eat fine."
    (found,) = evidence.predict_evidence([post], top_k=3, symptoms=[["FATIGUE", "ANHEDONIA"]])
    assert list(found) == ["ANHEDONIA", "FATIGUE"]  # in the model's label order
    for symptom, sentences in found.items():
        assert [s.rank for s in sentences] == [1, 2, 3]
        scores = [s.score for s in sentences]
        assert scores == sorted(scores, reverse=True)
        for sentence in sentences:
            assert post[sentence.start : sentence.end] == sentence.text
            assert sentence.decision == (sentence.score >= THRESHOLDS[symptom])
    (every,) = evidence.predict_evidence([post], top_k=None)
    assert list(every) == list(SYMPTOMS) and all(len(s) == 4 for s in every.values())


def test_an_ensemble_predicts_the_mean_of_its_members(models, tmp_path):
    members = {"a": models["criteria"], "b": models["other"]}
    write_ensemble(tmp_path / "ensemble", members, THRESHOLDS, tuned=None)
    ensemble = load_classifier(tmp_path / "ensemble", device="cpu")
    alone = [
        load_classifier(path, device="cpu").predict(TEXTS).probabilities
        for path in members.values()
    ]
    assert not np.allclose(alone[0], alone[1]), "two trainings differ"
    np.testing.assert_allclose(
        ensemble.predict(TEXTS).probabilities, np.mean(alone, axis=0), atol=1e-6
    )


def test_symptoms_asked_for_must_be_the_models_and_one_list_per_post(models):
    evidence = load_classifier(models["evidence"], device="cpu")
    with pytest.raises(UsageError, match="unknown symptom.s. TIREDNESS"):
        evidence.predict_evidence(["I am tired."], symptoms=[["TIREDNESS"]])
    with pytest.raises(UsageError, match="names 1 posts' symptoms for 2 posts"):
        evidence.predict_evidence(["One.", "Two."], symptoms=[["FATIGUE"]])
