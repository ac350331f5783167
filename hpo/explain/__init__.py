"""Predictions that explain themselves: a criteria model's symptoms joined with an evidence
model's sentences for each symptom found, as JSON lines and a self-contained HTML report."""

from hpo.explain.files import ExplainSummary, explain_file, is_explanations_file, record
from hpo.explain.join import Explanation, Explanations, Finding, Pair, load_pair
from hpo.explain.pair import MismatchedPair, check_pair
from hpo.explain.quality import ModelQuality, model_quality
from hpo.explain.report import render_report

__all__ = [
    "ExplainSummary",
    "Explanation",
    "Explanations",
    "Finding",
    "MismatchedPair",
    "ModelQuality",
    "Pair",
    "check_pair",
    "explain_file",
    "is_explanations_file",
    "load_pair",
    "model_quality",
    "record",
    "render_report",
]
