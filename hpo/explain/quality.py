"""How good a model of the pair is, as its own finalize measured it: the test figures (with
their bootstrap intervals where finalize computed them) from the ``metrics.json`` that
``hpo finalize`` writes beside ``final/model``.

A model folder with no such file beside it (a trial's checkpoint, a model copied elsewhere)
has no test figures to show; the report says so instead of leaving the reader to assume.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpo.final.summary import FinalSummary
from hpo.train.posts import EVIDENCE_PREFIX

SUMMARY_FILE = "metrics.json"  # finalize's summary, in final/ beside model/
# Shown when the test split measured them: the post-level F1s the ReDSM5 paper reports (criteria)
# and the sentence ranking figures (evidence); the study's own metric is always shown.
HEADLINE = (
    "post_micro_f1",
    "post_macro_f1",
    "average_precision",
    "auroc",
    "recall_at_1",
    "recall_at_3",
)


# how well sentences are ranked as evidence, as the evidence task measures it; a whole_post
# criteria model records the same figures of its own sentence scores under EVIDENCE_PREFIX
RANKING = ("average_precision", "recall_at_1", "recall_at_3")
OWN_RANKING = EVIDENCE_PREFIX + "recall_at_1"


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    low: float | None = None  # the 95% bootstrap interval over test posts, where computed
    high: float | None = None


@dataclass(frozen=True)
class ModelQuality:
    role: str  # "criteria" or "evidence"
    model: str  # the folder as given
    source: str | None  # the metrics.json read; None: none found beside the model
    study: str | None = None
    test_posts: int | None = None
    threshold_rule: str | None = None  # how finalize chose the decision thresholds
    figures: tuple[Figure, ...] = ()


def model_quality(role: str, model_dir: str | Path) -> ModelQuality:
    """The test figures of the model in ``model_dir``, read from finalize's summary beside it
    (``model_dir``'s parent, or its target's when it is a link); none when there is none or it
    cannot be read: the report explains predictions either way."""
    found = _summary_beside(model_dir)
    if found is None:
        return ModelQuality(role, str(model_dir), None)
    return _quality(role, str(model_dir), *found)


def _summary_beside(model_dir: str | Path) -> tuple[Path, FinalSummary] | None:
    """finalize's summary beside ``model_dir`` (or beside its target, when it is a link)."""
    folder = Path(model_dir)
    for candidate in dict.fromkeys((folder.parent, folder.resolve().parent)):
        summary = _summary(candidate / SUMMARY_FILE)
        if summary is not None:
            return candidate / SUMMARY_FILE, summary
    return None


def _summary(path: Path) -> FinalSummary | None:
    try:
        return FinalSummary.read(path)
    except (OSError, UnicodeDecodeError, ValueError):  # pydantic's ValidationError is one
        return None  # a trial's metrics.json (validation only), or another program's file


def _quality(role: str, model: str, path: Path, summary: FinalSummary) -> ModelQuality:
    metrics, intervals, metric = summary.test.metrics, summary.test.intervals, summary.metric
    if role == "evidence" and OWN_RANKING in metrics:  # a whole_post model finding its evidence
        metrics = {name: metrics[EVIDENCE_PREFIX + name] for name in RANKING}
        intervals, metric = {}, None
    figures = tuple(
        Figure(
            name,
            float(value),
            intervals[name].low if name in intervals else None,
            intervals[name].high if name in intervals else None,
        )
        for name in dict.fromkeys((*HEADLINE, metric))
        if isinstance(value := metrics.get(name), int | float)
    )
    test = summary.split_sizes.get("test")
    return ModelQuality(
        role,
        model,
        str(path),
        summary.study,
        test.posts if test else None,
        summary.rule,
        figures,
    )


def one_model_for_both(criteria_dir: str | Path, evidence_dir: str | Path) -> tuple[bool, str]:
    """Whether a whole_post criteria model's own sentence scores find the evidence at least as
    well as the evidence model does: on every ranking figure, on validation (where each
    model's finalize measured it, the figure its study could be chosen by; test stays unread),
    and why, in words."""
    own, theirs = _validation(criteria_dir), _validation(evidence_dir)
    if own is None or theirs is None:
        missing = criteria_dir if own is None else evidence_dir
        return False, (
            f"no finalize summary with validation figures beside {missing}, so the two cannot "
            "be compared: the evidence model ranks the sentences"
        )
    mine = {name: own.get(EVIDENCE_PREFIX + name) for name in RANKING}
    other = {name: theirs.get(name) for name in RANKING}
    if any(not isinstance(value, int | float) for value in (*mine.values(), *other.values())):
        return False, "a ranking figure is missing from a summary: the evidence model ranks"
    better = all(mine[name] >= other[name] for name in RANKING)
    compared = ", ".join(f"{name} {mine[name]:.3f} vs {other[name]:.3f}" for name in RANKING)
    choice = (
        "the criteria model finds its own evidence (one model for both)"
        if better
        else "the evidence model ranks the sentences"
    )
    return better, f"validation, whole_post criteria model vs evidence model: {compared}: {choice}"


def _validation(model_dir: str | Path) -> dict | None:
    found = _summary_beside(model_dir)
    return found[1].chosen.validation if found else None
