"""evidence: every sentence of a post paired with each criterion in scope (``positive_criteria``,
those the post shows, or ``all_criteria``), labelled 1 where an aligned status-1 annotation of
that criterion covers it; an annotated sentence is otherwise a hard negative, and one no
annotator labelled is ``annotated=False`` (training may subsample those)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hpo.data import Corpus, Example
from hpo.data.redsm5 import ANNOTATIONS_FILE
from hpo.data.tasks import evidence_candidates
from hpo.errors import DataError
from hpo.train.config import TrainConfig
from hpo.train.formulations._base import BaseFormulation
from hpo.vocabulary import EvidenceScope

log = logging.getLogger(__name__)


class Evidence(BaseFormulation):
    name = "evidence"
    splits_sentences = True

    def evidence_scope(self, config: TrainConfig) -> EvidenceScope:
        return config.evidence_scope

    def examples(
        self, corpus: Corpus, descriptions: Mapping[str, str], scope: EvidenceScope | None
    ) -> list[Example]:
        examples, alignment = evidence_candidates(
            corpus, descriptions, scope or "positive_criteria"
        )
        log.info("evidence: %s", alignment.summary())
        if not any(example.label == 1 for example in examples):
            raise DataError(
                f"no examples for task 'evidence': no annotation in {ANNOTATIONS_FILE} "
                "with status 1 for one of "
                "the nine criteria could be found in its post; add annotations or use the "
                "criteria task"
            )
        return examples
