"""Predictions from a saved classifier on new posts, read exactly as training read its data.

A model folder is what ``save_classifier`` writes (a trial's ``checkpoint/``, finalize's
model). Its ``inference`` block (``InferenceSettings``) says how training turned text into
model inputs (formulation, max_length, long_text, criterion descriptions) and where to
decide. Loading is
training's meta-safe path, tokenizing is ``tokenize_pairs`` and scoring is
``evaluate.split_probabilities``, so a post gets the probabilities the training code would give it.

    predictor = load_classifier("final/model")
    predictor.predict(["I can't sleep and nothing feels fun anymore."]).probabilities
"""

from hpo.predict._files import FileSummary, criteria_header, is_predictions_file, predict_file
from hpo.predict._folder import NotAModel, load_classifier, read_settings
from hpo.predict._model import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_TOP_K,
    CriteriaPredictions,
    Predictor,
    Progress,
    ScoredSentence,
)
from hpo.predict._progress import ProgressLines

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_TOP_K",
    "CriteriaPredictions",
    "FileSummary",
    "NotAModel",
    "Predictor",
    "Progress",
    "ProgressLines",
    "ScoredSentence",
    "criteria_header",
    "is_predictions_file",
    "load_classifier",
    "predict_file",
    "read_settings",
]
