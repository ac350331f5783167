"""``hpo predict MODEL``: a file of posts in, one predictions CSV out, whole or not at all."""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpo.data.posts import load_posts
from hpo.outputs import atomic_text, refuse_unsafe_output
from hpo.predict._folder import load_classifier
from hpo.predict._model import DEFAULT_BATCH_SIZE, DEFAULT_TOP_K, Progress

EVIDENCE_HEADER = ("post_id", "symptom", "rank", "sentence", "score", "evidence")
HEADER_BYTES = 1 << 16  # read to recognise an earlier predictions file: any header fits


@dataclass(frozen=True)
class FileSummary:
    task: str
    posts: int
    rows: int
    load_seconds: float  # reading the posts and loading the model
    predict_seconds: float

    @property
    def posts_per_second(self) -> float:
        return self.posts / max(self.predict_seconds, 1e-9)


def predict_file(
    model_dir: str | Path,
    input_path: str | Path,
    out: str | Path,
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: str = "auto",
    top_k: int | None = DEFAULT_TOP_K,
    progress: Callable[[int], Progress] | None = None,
    force: bool = False,
) -> FileSummary:
    """Predict every post of ``input_path`` and write one CSV to ``out``, whole or not at all.

    Criteria: one row per post, each symptom's decision (0/1) and ``<symptom>_prob``.
    Evidence: one row per post, symptom and ranked sentence (``top_k``; None: every sentence).
    ``progress(total_posts)`` is called once, after loading, and returns the per-block callback.
    ``out`` is never the input, inside the model folder or a database; an existing file that
    is not an earlier predictions CSV is replaced only with ``force``."""
    started = time.perf_counter()
    out_rules = {
        "protected": {input_path: "the --input file", model_dir: "the model folder"},
        "may_replace": is_predictions_file,
        "kind": "predictions file",
        "force": force,
        "suffix": (
            ".csv",
            "one model's predictions are a CSV (the joined prediction of "
            "--criteria and --evidence is JSON lines)",
        ),
    }
    refuse_unsafe_output(out, **out_rules)  # before anything costs time; checked again when written
    posts = load_posts(input_path)  # bad input fails here, before the model costs anything
    predictor = load_classifier(model_dir, device)
    loaded = time.perf_counter()
    step = progress(len(posts)) if progress is not None else None
    texts = [post.text for post in posts]
    if predictor.task == "criteria":
        predictions = predictor.predict(texts, batch_size, step)
        labels = predictions.labels
        header = criteria_header(labels)
        rows = [
            [post.post_id, *map(int, decided), *map(float, probs)]
            for post, decided, probs in zip(
                posts, predictions.decisions, predictions.probabilities, strict=True
            )
        ]
    else:
        header = list(EVIDENCE_HEADER)
        rows = [
            [post.post_id, label, s.rank, s.text, s.score, int(s.decision)]
            for post, top in zip(
                posts, predictor.predict_evidence(texts, top_k, batch_size, step), strict=True
            )
            for label, sentences in top.items()
            for s in sentences
        ]
    predicted = time.perf_counter()
    with atomic_text(out, **out_rules) as stream:
        writer = csv.writer(stream, lineterminator="\n")  # the csv module's default is \r\n
        writer.writerow(header)
        writer.writerows(rows)
    return FileSummary(predictor.task, len(posts), len(rows), loaded - started, predicted - loaded)


def criteria_header(labels: Sequence[str]) -> list[str]:
    return ["post_id", *labels, *(f"{label}_prob" for label in labels)]


def is_predictions_file(path: Path) -> bool:
    """``path`` starts with the header ``predict_file`` writes: a rerun may replace it."""
    try:
        with path.open(encoding="utf-8", newline="") as stream:
            first = stream.read(HEADER_BYTES).splitlines()[:1]
    except (OSError, UnicodeDecodeError):
        return False
    header = next(csv.reader(first), [])
    labels = header[1 : 1 + (len(header) - 1) // 2]
    return tuple(header) == EVIDENCE_HEADER or (
        len(header) >= 3 and header == criteria_header(labels)
    )
