"""The formulations: how a task is put to the model, one module each, found by name.

A formulation is one word of ``hpo.vocabulary`` (its ``TRAITS``: what every layer may know of
it) and one module here (what it does: its examples, how they are tokenized, its optimizer
step), as Optuna's samplers extend ``BaseSampler``. Code outside this package asks a
formulation's traits or its object, never its name.
"""

from __future__ import annotations

from collections.abc import Mapping

from hpo.data import SYMPTOMS, Corpus, Example
from hpo.errors import DataError, UsageError
from hpo.train.formulations._base import BaseFormulation
from hpo.train.formulations.evidence import Evidence
from hpo.train.formulations.multilabel import Multilabel
from hpo.train.formulations.pairs import Pairs
from hpo.train.formulations.whole_post import WholePost
from hpo.vocabulary import (
    CRITERIA_FORMULATIONS,
    EVIDENCE_SCOPES,
    TASKS,
    TRAITS,
    CriteriaFormulation,
    EvidenceScope,
    Formulation,
    Task,
    formulation_for,
)

_BY_NAME: dict[str, BaseFormulation] = {
    kind.name: kind() for kind in (Pairs, Multilabel, WholePost, Evidence)
}
assert _BY_NAME.keys() == TRAITS.keys(), "every formulation word has its module, and only those"


def formulation_of(name: Formulation) -> BaseFormulation:
    """The formulation a spec, a training config or a saved model names."""
    return _BY_NAME[name]


def build_examples(
    corpus: Corpus,
    task: Task,
    descriptions: Mapping[str, str],
    formulation: CriteriaFormulation = "pairs",
    evidence_scope: EvidenceScope = "positive_criteria",
) -> list[Example]:
    """The examples of ``task`` (put to the model as ``formulation``, for criteria; evidence
    has one formulation, its sentences paired with the criteria in ``evidence_scope``),
    deterministically ordered (posts in file order). Every formulation of criteria describes
    the same post x symptom matrix."""
    if task not in TASKS:
        raise UsageError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    if formulation not in CRITERIA_FORMULATIONS:
        raise UsageError(
            f"unknown criteria formulation {formulation!r}; "
            f"choose one of {', '.join(CRITERIA_FORMULATIONS)}"
        )
    if evidence_scope not in EVIDENCE_SCOPES:
        raise UsageError(
            f"unknown evidence scope {evidence_scope!r}; choose one of {', '.join(EVIDENCE_SCOPES)}"
        )
    missing = [symptom for symptom in SYMPTOMS if symptom not in descriptions]
    if missing:
        raise DataError(
            f"no description for {', '.join(missing)}; load them with load_descriptions()"
        )
    return formulation_of(formulation_for(task, formulation)).examples(
        corpus, descriptions, evidence_scope
    )


__all__ = ["BaseFormulation", "build_examples", "formulation_of"]
