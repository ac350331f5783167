"""How good a model of the pair is, as its own finalize measured it: the test figures (with
their bootstrap intervals where finalize computed them) from the ``metrics.json`` that
``hpo finalize`` writes beside ``final/model``.

A model folder with no such file beside it (a trial's checkpoint, a model copied elsewhere)
has no test figures to show; the report says so instead of leaving the reader to assume.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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
    folder = Path(model_dir)
    for candidate in dict.fromkeys((folder.parent, folder.resolve().parent)):
        summary = _summary(candidate / SUMMARY_FILE)
        if summary is not None:
            return _quality(role, str(model_dir), candidate / SUMMARY_FILE, summary)
    return ModelQuality(role, str(model_dir), None)


def _summary(path: Path) -> dict | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("test"), dict):
        return None  # a trial's metrics.json (validation only), or another program's file
    return found


def _quality(role: str, model: str, path: Path, summary: dict) -> ModelQuality:
    test = summary["test"]
    metrics, intervals = test.get("metrics", {}), test.get("intervals", {})
    names = [*HEADLINE, summary.get("metric")]
    figures = tuple(
        Figure(
            name,
            float(metrics[name]),
            intervals.get(name, {}).get("low"),
            intervals.get(name, {}).get("high"),
        )
        for name in dict.fromkeys(names)
        if name in metrics and isinstance(metrics[name], int | float)
    )
    posts = summary.get("split_sizes", {}).get("test", {}).get("posts")
    return ModelQuality(
        role,
        model,
        str(path),
        summary.get("study"),
        posts,
        summary.get("thresholds", {}).get("rule"),
        figures,
    )
