"""ReDSM5-format data: loading, task examples and grouped splits (sample data: ``hpo.fixtures``)."""

from hpo.data.redsm5 import (
    ANNOTATIONS_FILE,
    POSTS_FILE,
    SPECIAL_CASE,
    SYMPTOMS,
    Annotation,
    Corpus,
    Post,
    files_fingerprint,
    load_redsm5,
    normalise_symptom,
)
from hpo.data.split import Splits, split_by_post
from hpo.data.tasks import TASKS, Example, build_examples, load_descriptions

__all__ = [
    "ANNOTATIONS_FILE",
    "POSTS_FILE",
    "SPECIAL_CASE",
    "SYMPTOMS",
    "TASKS",
    "Annotation",
    "Corpus",
    "Example",
    "Post",
    "Splits",
    "build_examples",
    "files_fingerprint",
    "load_descriptions",
    "load_redsm5",
    "normalise_symptom",
    "split_by_post",
]
