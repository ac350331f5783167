"""Turn a corpus into (criterion description, text) pair examples for the two tasks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from hpo.data.redsm5 import ANNOTATIONS_FILE, SYMPTOMS, Corpus, normalise_symptom
from hpo.errors import DataError, UsageError

TASKS = ("criteria", "evidence")


@dataclass(frozen=True)
class Example:
    post_id: str
    criterion: str
    text_a: str  # the criterion description
    text_b: str  # the whole post (criteria) or one sentence (evidence)
    label: int


def load_descriptions(path: str | Path | None = None) -> dict[str, str]:
    """Return symptom -> description, in ``SYMPTOMS`` order.

    Without ``path`` the packaged ``criteria.yaml`` is used. A user file replaces it
    entirely (no merging, so no description is silently taken from elsewhere) and must
    map each of the nine symptoms, spelled in any case, to a non-empty string.
    """
    if path is None:
        source = "hpo/data/criteria.yaml"
        text = resources.files("hpo.data").joinpath("criteria.yaml").read_text(encoding="utf-8")
    else:
        source = str(path)
        if not Path(path).is_file():
            raise DataError(
                f"{source}: description file not found; pass a YAML mapping of the nine symptoms"
            )
        text = Path(path).read_text(encoding="utf-8")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise DataError(f"{source}: {where}invalid YAML ({problem}); fix the syntax") from exc
    if not isinstance(raw, dict):
        raise DataError(
            f"{source}: expected a mapping 'SYMPTOM: description', got {type(raw).__name__}"
        )
    descriptions: dict[str, str] = {}
    unknown = []
    for key, value in raw.items():
        symptom = normalise_symptom(str(key))
        if symptom not in SYMPTOMS:
            unknown.append(str(key))
        elif symptom in descriptions:
            raise DataError(
                f"{source}: {key!r} repeats {symptom}; keep one description per symptom"
            )
        elif not isinstance(value, str) or not value.strip():
            raise DataError(f"{source}: {key!r}: the description must be a non-empty string")
        else:
            descriptions[symptom] = value.strip()
    if unknown:
        raise DataError(
            f"{source}: unknown symptom key(s) {', '.join(unknown)}; use only {', '.join(SYMPTOMS)}"
        )
    missing = [symptom for symptom in SYMPTOMS if symptom not in descriptions]
    if missing:
        raise DataError(
            f"{source}: no description for {', '.join(missing)}; add one sentence for each"
        )
    return {symptom: descriptions[symptom] for symptom in SYMPTOMS}


def build_examples(corpus: Corpus, task: str, descriptions: Mapping[str, str]) -> list[Example]:
    """Build the examples of ``task``, deterministically ordered.

    criteria: one example per (post, criterion) for every post and each of the nine
    criteria; label 1 iff the post has a status=1 annotation for that criterion. Posts in
    file order, criteria in ``SYMPTOMS`` order.

    evidence: one example per (annotated sentence, criterion), de-duplicated on
    (post_id, sentence_id, criterion):
      - each annotation of one of the nine criteria gives its status as the label; when a
        sentence has both status 1 and 0 rows for a criterion, 1 wins;
      - hard negatives: for every distinct annotated sentence s of post p (any label,
        SPECIAL_CASE included) and every criterion C annotated (any status) somewhere in
        p but not on s, (C, s) gets label 0.
    Posts in file order, sentences in order of first annotation, criteria in ``SYMPTOMS`` order.
    """
    if task not in TASKS:
        raise UsageError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    missing = [symptom for symptom in SYMPTOMS if symptom not in descriptions]
    if missing:
        raise DataError(
            f"no description for {', '.join(missing)}; load them with load_descriptions()"
        )
    build = _criteria_examples if task == "criteria" else _evidence_examples
    examples = build(corpus, descriptions)
    if not examples:
        raise DataError(
            f"no examples for task {task!r}: no annotation in {ANNOTATIONS_FILE} is one of the nine "
            "criteria; add annotations or use the criteria task"
        )
    return examples


def _criteria_examples(corpus: Corpus, descriptions: Mapping[str, str]) -> list[Example]:
    present = {(a.post_id, a.symptom) for a in corpus.annotations if a.status == 1}
    return [
        Example(
            post.post_id,
            criterion,
            descriptions[criterion],
            post.text,
            int((post.post_id, criterion) in present),
        )
        for post in corpus.posts.values()
        for criterion in SYMPTOMS
    ]


def _evidence_examples(corpus: Corpus, descriptions: Mapping[str, str]) -> list[Example]:
    sentences: dict[str, dict[str, str]] = {}  # post_id -> sentence_id -> text, first-seen order
    labels: dict[
        tuple[str, str], dict[str, int]
    ] = {}  # (post_id, sentence_id) -> criterion -> label
    for a in corpus.annotations:
        sentences.setdefault(a.post_id, {}).setdefault(a.sentence_id, a.sentence_text)
        on_sentence = labels.setdefault((a.post_id, a.sentence_id), {})
        if a.symptom in SYMPTOMS:
            on_sentence[a.symptom] = max(on_sentence.get(a.symptom, 0), a.status)
    examples = []
    for post_id in corpus.posts:
        post_sentences = sentences.get(post_id, {})
        in_post = {
            criterion
            for sentence_id in post_sentences
            for criterion in labels[(post_id, sentence_id)]
        }
        for sentence_id, text in post_sentences.items():
            on_sentence = labels[(post_id, sentence_id)]
            for criterion in SYMPTOMS:
                if criterion in in_post:
                    label = on_sentence.get(criterion, 0)
                    examples.append(
                        Example(post_id, criterion, descriptions[criterion], text, label)
                    )
    return examples
