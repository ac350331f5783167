"""``hpo predict --criteria [--evidence]``: a file of posts in, one JSON line per post out (and
optionally the HTML report), whole or not at all. A whole_post criteria model may be both.

Each line: ``{"post_id": …, "symptoms": {SYMPTOM: {"probability", "threshold", "present",
"evidence": [{"rank", "sentence_index", "start", "end", "text", "score", "evidence"}, …]},
…}}`` with
every symptom in label order; ``evidence`` lists the top-k sentences of a present symptom
(``text == post[start:end]``) and is empty for an absent one, which was never scored.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from hpo.data.posts import load_posts
from hpo.errors import UsageError
from hpo.explain.join import Explanation, load_pair
from hpo.explain.pair import check_pair
from hpo.explain.quality import model_quality, one_model_for_both
from hpo.explain.report import GENERATOR, render_report
from hpo.outputs import atomic_text, refuse_unsafe_output
from hpo.predict import DEFAULT_BATCH_SIZE, DEFAULT_TOP_K, Progress, read_settings

FIRST_LINE_BYTES = 1 << 20  # read to recognise an earlier output: one post's line fits


@dataclass(frozen=True)
class ExplainSummary:
    posts: int
    found: int  # symptoms predicted present, over all posts: what the evidence model scored
    load_seconds: float  # reading the posts and loading both models
    criteria_seconds: float
    evidence_seconds: float
    # why the pair's training data could not be compared, if it could not
    unchecked_data: str | None
    # which model ranked the sentences, and why: said where a whole_post criteria model could
    evidence_by: str | None = None

    @property
    def posts_per_second(self) -> float:
        return self.posts / max(self.criteria_seconds + self.evidence_seconds, 1e-9)


def explain_file(
    criteria_dir: str | Path,
    evidence_dir: str | Path | None,
    input_path: str | Path,
    out: str | Path,
    html: str | Path | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: str = "auto",
    top_k: int | None = DEFAULT_TOP_K,
    progress: Callable[[int, str], Progress] | None = None,
    force: bool = False,
) -> ExplainSummary:
    """Explain every post of ``input_path``; JSON lines at ``out``, the HTML report at ``html``.
    Bad input, a mismatched pair or an unsafe output path is refused before any model loads,
    and nothing is written. ``progress(total, half)``: a counter of the posts through each half
    ("criteria", then "evidence"), as ``predict_file``'s ``progress(total)``. A whole_post
    criteria model ranks the sentences itself when ``evidence_dir`` is None, or when it does
    so at least as well as the evidence model on validation (``one_model_for_both``)."""
    started = time.perf_counter()
    protected = {
        input_path: "the --input file",
        criteria_dir: "the --criteria model folder",
    } | ({evidence_dir: "the --evidence model folder"} if evidence_dir is not None else {})
    outputs = {
        Path(out): _rules(
            protected, is_explanations_file, "joined predictions file (JSON lines)", force
        )
        | {"suffix": (".jsonl", JOINED_IS_JSON_LINES)}
    }
    if html is not None:
        if Path(html).resolve() == Path(out).resolve():
            raise UsageError(f"--html {html} is the --out file; give the report its own path")
        outputs[Path(html)] = _rules(protected, is_report_file, "predictions report (HTML)", force)
    for path, rules in outputs.items():
        # before anything costs time; checked again when written
        refuse_unsafe_output(path, **rules)
    evidence_dir, evidence_by = _evidence_model(criteria_dir, evidence_dir)
    posts = load_posts(input_path)
    pair = load_pair(criteria_dir, evidence_dir, device)
    loaded = time.perf_counter()
    texts = [post.text for post in posts]
    counter = functools.partial(progress, len(posts)) if progress is not None else None
    result = pair.explain(texts, top_k, batch_size, counter)
    ids = [post.post_id for post in posts]
    contents = {
        Path(out): "".join(
            json.dumps(record(post_id, post), ensure_ascii=False) + "\n"
            for post_id, post in zip(ids, result.posts, strict=True)
        )
    }
    if html is not None:
        contents[Path(html)] = render_report(
            ids,
            texts,
            result.posts,
            models=[
                model_quality("criteria", criteria_dir),
                model_quality("evidence", evidence_dir or criteria_dir),
            ],
        )
    with ExitStack() as stack:  # every file renamed into place only once all are written
        for path, text in contents.items():
            stack.enter_context(atomic_text(path, **outputs[path])).write(text)
    return ExplainSummary(
        len(posts),
        sum(len(post.present) for post in result.posts),
        loaded - started,
        result.criteria_seconds,
        result.evidence_seconds,
        pair.unchecked_data,
        evidence_by,
    )


def _evidence_model(
    criteria_dir: str | Path, evidence_dir: str | Path | None
) -> tuple[str | Path | None, str | None]:
    """The evidence model to load (None: the criteria model itself) and, where a whole_post
    criteria model could rank the sentences, which one does and why. Checked before any model
    loads: a pair must fit (``check_pair``), and a criteria model alone must be whole_post."""
    settings = read_settings(criteria_dir)
    formulation, whole_post = settings.formulation, settings.traits.scores_sentences
    if evidence_dir is None:
        if not whole_post:
            raise UsageError(
                f"--criteria needs --evidence too: {criteria_dir} is a {formulation} model, "
                "which cannot find the evidence itself (a whole_post one can); pass the "
                "evidence study's final/model"
            )
        return None, "the whole_post criteria model ranks each post's sentences itself"
    check_pair(criteria_dir, evidence_dir)
    if not whole_post:
        return evidence_dir, None
    both, why = one_model_for_both(criteria_dir, evidence_dir)
    return (None if both else evidence_dir), why


def record(post_id: str, post: Explanation) -> dict:
    """One output line's object."""
    return {
        "post_id": post_id,
        "symptoms": {
            symptom: {
                "probability": finding.probability,
                "threshold": finding.threshold,  # the criteria model's, for this symptom
                "present": finding.present,
                "evidence": [
                    {
                        "rank": s.rank,
                        "sentence_index": s.index,
                        "start": s.start,
                        "end": s.end,
                        "text": s.text,
                        "score": s.score,
                        "evidence": s.decision,
                    }
                    for s in finding.evidence
                ],
            }
            for symptom, finding in post.findings.items()
        },
    }


def is_explanations_file(path: Path) -> bool:
    """``path`` starts with a line ``explain_file`` writes: a rerun may replace it."""
    try:
        with path.open(encoding="utf-8") as stream:
            first = json.loads(stream.readline(FIRST_LINE_BYTES))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(first, dict) and set(first) == {"post_id", "symptoms"}


def is_report_file(path: Path) -> bool:
    """``path`` is a report ``render_report`` wrote."""
    try:
        with path.open(encoding="utf-8") as stream:
            head = stream.read(1024)
    except (OSError, UnicodeDecodeError):
        return False
    return head.startswith("<!DOCTYPE html>") and f'content="{GENERATOR}"' in head


JOINED_IS_JSON_LINES = "the joined prediction is JSON lines (a post's symptoms and their sentences)"


def _rules(protected: dict, may_replace: Callable[[Path], bool], kind: str, force: bool) -> dict:
    return {"protected": protected, "may_replace": may_replace, "kind": kind, "force": force}
