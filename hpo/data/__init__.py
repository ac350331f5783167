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
from hpo.data.split import (
    PostSplit,
    Splits,
    kfold_posts,
    partition,
    share_of_train,
    split_posts,
    symptom_profiles,
)
from hpo.data.tasks import (
    MULTILABEL,
    Alignment,
    Example,
    evidence_candidates,
    load_descriptions,
    shown,
)

__all__ = [
    "ANNOTATIONS_FILE",
    "POSTS_FILE",
    "SPECIAL_CASE",
    "SYMPTOMS",
    "MULTILABEL",
    "Alignment",
    "Annotation",
    "Corpus",
    "Example",
    "Post",
    "PostSplit",
    "Splits",
    "evidence_candidates",
    "files_fingerprint",
    "load_descriptions",
    "load_redsm5",
    "kfold_posts",
    "normalise_symptom",
    "partition",
    "share_of_train",
    "shown",
    "split_posts",
    "symptom_profiles",
]
