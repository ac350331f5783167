"""What the examples of the two tasks are built from: an example, the criteria's descriptions,
which symptoms a post shows, and each post's sentences aligned with its annotations (the
formulations, ``hpo.train.formulations``, build the examples)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from hpo.data.redsm5 import SYMPTOMS, Corpus, normalise_symptom
from hpo.data.sentences import NO_SENTENCE, NOT_IN_POST, covered, locate, split_sentences
from hpo.errors import DataError
from hpo.vocabulary import EvidenceScope

log = logging.getLogger(__name__)

MULTILABEL = ""  # the criterion of a multilabel example: all nine at once


@dataclass(frozen=True)
class Example:
    post_id: str
    criterion: str  # the symptom, or MULTILABEL
    text_a: str | None  # the criterion description; None when the text stands alone (multilabel)
    text_b: str  # the whole post (criteria) or one sentence (evidence)
    # 0/1, or one 0/1 per symptom in SYMPTOMS order (multilabel, whole_post)
    label: int | tuple[int, ...]
    annotated: bool = True  # evidence: False for a sentence no annotator labelled
    # whole_post: the post's sentences (split_sentences), and per sentence one 0/1 per symptom:
    # 1 where a status-1 annotation of that symptom covers it (the evidence task's positives)
    sentences: tuple[str, ...] = ()
    evidence: tuple[tuple[int, ...], ...] = ()
    # whole_post: likewise, 1 where a status-0 annotation of that symptom covers it and no
    # status-1 one does: the symptom touched but not shown (its hard negatives)
    touched: tuple[tuple[int, ...], ...] = ()
    # criteria: like label, 1 for a symptom the post touches without showing it (touched_only)
    hard_negative: int | tuple[int, ...] = 0


@dataclass(frozen=True)
class Alignment:
    """How the annotation rows of a corpus found their sentences (evidence task)."""

    rows: int
    unaligned: tuple[tuple[str, str, str], ...]  # (post_id, sentence_id, why)

    def summary(self) -> str:
        if not self.unaligned:
            return f"all {self.rows} annotation rows aligned to split sentences"
        reasons = Counter(why for _, _, why in self.unaligned)
        detail = "; ".join(f"{n} because {why}" for why, n in reasons.most_common())
        examples = ", ".join(sentence_id for _, sentence_id, _ in self.unaligned[:3])
        return (
            f"{self.rows - len(self.unaligned)} of {self.rows} annotation rows aligned "
            "to split sentences; "
            f"{len(self.unaligned)} left out ({detail}; e.g. {examples})"
        )


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


def shown(corpus: Corpus) -> set[tuple[str, str]]:
    """(post, symptom) for every symptom a post shows: a status-1 annotation of it."""
    return {(a.post_id, a.symptom) for a in corpus.annotations if a.status == 1}


def touched_only(corpus: Corpus) -> set[tuple[str, str]]:
    """(post, symptom) for every symptom a post touches without showing it: a status-0
    annotation of it and no status-1 one (the hard negatives)."""
    touched = {(a.post_id, a.symptom) for a in corpus.annotations if a.status == 0}
    return touched - shown(corpus)


def evidence_candidates(
    corpus: Corpus, descriptions: Mapping[str, str], scope: EvidenceScope = "positive_criteria"
) -> tuple[list[Example], Alignment]:
    """Every (sentence, criterion in scope) of every post, and how the annotations aligned."""
    examples, unaligned = [], []
    for post, sentences, labels, rows in aligned_posts(corpus, unaligned):
        if scope == "all_criteria":
            in_scope = SYMPTOMS
        else:
            shown = {a.symptom for a in rows if a.status == 1}
            in_scope = tuple(criterion for criterion in SYMPTOMS if criterion in shown)
        for i, sentence in enumerate(sentences):
            on_sentence = labels.get(i)
            for criterion in in_scope:
                label = on_sentence.get(criterion, 0) if on_sentence else 0
                examples.append(
                    Example(
                        post.post_id,
                        criterion,
                        descriptions[criterion],
                        sentence.text,
                        label,
                        annotated=on_sentence is not None,
                    )
                )
    return examples, Alignment(len(corpus.annotations), tuple(unaligned))


def aligned_posts(corpus: Corpus, unaligned: list | None = None) -> Iterator[tuple]:
    """Per post in file order: the post, its split sentences, per sentence the status of each
    symptom annotated on it (sentence -> symptom -> status; SPECIAL_CASE marks it annotated),
    and the post's annotation rows. A row that covers no sentence is appended to
    ``unaligned`` as (post_id, sentence_id, why)."""
    rows_of: dict[str, list] = {}
    for a in corpus.annotations:
        rows_of.setdefault(a.post_id, []).append(a)
    for post in corpus.posts.values():
        rows = rows_of.get(post.post_id, [])
        sentences = split_sentences(post.text)
        labels: dict[int, dict[str, int]] = {}
        for a in rows:
            span = locate(post.text, a.sentence_text)
            hits = covered(sentences, span) if span else []
            if not hits and unaligned is not None:
                unaligned.append(
                    (a.post_id, a.sentence_id, NOT_IN_POST if span is None else NO_SENTENCE)
                )
            for i in hits:
                on_sentence = labels.setdefault(i, {})
                on_sentence[a.symptom] = max(on_sentence.get(a.symptom, 0), a.status)
        yield post, sentences, labels, rows
