"""criteria as one example per post, labelled with all nine symptoms at once."""

from __future__ import annotations

from collections.abc import Mapping

from hpo.data import MULTILABEL, SYMPTOMS, Corpus, Example
from hpo.data.tasks import shown, touched_only
from hpo.train.formulations._base import BaseFormulation


class Multilabel(BaseFormulation):
    name = "multilabel"

    def examples(self, corpus: Corpus, descriptions: Mapping[str, str], scope) -> list[Example]:
        present, touched = shown(corpus), touched_only(corpus)
        return [
            Example(
                post.post_id,
                MULTILABEL,
                None,
                post.text,
                tuple(int((post.post_id, criterion) in present) for criterion in SYMPTOMS),
                hard_negative=tuple(
                    int((post.post_id, criterion) in touched) for criterion in SYMPTOMS
                ),
            )
            for post in corpus.posts.values()
        ]
