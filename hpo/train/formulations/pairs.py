"""criteria as pairs: one (criterion description, post) example per symptom, labelled 1 where
the post shows it."""

from __future__ import annotations

from collections.abc import Mapping

from hpo.data import SYMPTOMS, Corpus, Example
from hpo.data.tasks import shown, touched_only
from hpo.train.formulations._base import BaseFormulation


class Pairs(BaseFormulation):
    name = "pairs"

    def examples(self, corpus: Corpus, descriptions: Mapping[str, str], scope) -> list[Example]:
        present, touched = shown(corpus), touched_only(corpus)
        return [
            Example(
                post.post_id,
                criterion,
                descriptions[criterion],
                post.text,
                int((post.post_id, criterion) in present),
                hard_negative=int((post.post_id, criterion) in touched),
            )
            for post in corpus.posts.values()
            for criterion in SYMPTOMS
        ]
