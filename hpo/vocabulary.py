"""The words every layer shares, each spelled once: the tasks, how a task is put to a model,
what happens to a long text, which criteria an evidence model reads, and the metrics a study
can be judged by.

The ground floor: it imports nothing from hpo, so data, models, training, the study file and
a saved model's settings all take their choices from here (data and models may not import
each other). Each name is a ``Literal`` for pydantic and type checkers, beside the tuple of
its values for messages and loops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Task = Literal["criteria", "evidence"]
# criteria: one (criterion, post) pair per symptom, one post with all nine labels, or every
# sentence of the post scored for the nine and pooled per post (whole_post)
CriteriaFormulation = Literal["pairs", "multilabel", "whole_post"]
# how a task is put to the model, one name from the data to the saved model
Formulation = Literal["pairs", "multilabel", "whole_post", "evidence"]
# a text longer than max_length: keep the start, keep the start and the end, read it all in
# overlapping windows (hpo.data.tokenize), or, whole_post's reading, every sentence packed whole
# into windows (hpo.data.windows)
LongText = Literal["truncate", "head_tail", "chunks", "sentences"]
# whole_post: how a post's sentence scores become its score per symptom: the highest, a smooth
# maximum (log-mean-exp), or a learned attention over the sentences (hpo.models.pooling)
PostPooling = Literal["max", "logsumexp", "attention"]
# the criteria each post's sentences are paired with (evidence): those the post shows, or all
EvidenceScope = Literal["positive_criteria", "all_criteria"]
# what a study can be judged by. post_*: the post-level multi-label F1 the ReDSM5 paper reports
# (criteria only); recall_at_*: how often the evidence ranks first or in the top 3 (evidence only)
Metric = Literal[
    "macro_f1",
    "f1",
    "precision",
    "recall",
    "accuracy",
    "auroc",
    "average_precision",
    "post_micro_f1",
    "post_macro_f1",
    "recall_at_1",
    "recall_at_3",
]

# train.threshold: decide at 0.5 for every symptom, or per symptom at thresholds tuned on
# validation (hpo.train.evaluate records those metrics as TUNED_PREFIX twins)
Threshold = Literal["fixed", "tuned"]
TUNED_PREFIX = "tuned_"
# what a model trains on: the train split, or train and validation together (finalize's refit)
TrainOn = Literal["train", "train+validation"]
# finalize --refit: the chosen model as trained on train, or retrained once more on train +
# validation (REFIT_TRAIN_ON: the flag's shorter name for the training config's train_on)
Refit = Literal["train", "train+val"]
# finalize --ensemble: the chosen configuration's seeds averaged into one model, or its best
# seed alone
Ensemble = Literal["seeds", "none"]
# how finalize decides its model's thresholds, fixed from the flags before anything trains: 0.5
# everywhere, per symptom as tuned on validation (train.threshold: tuned), or per symptom on
# the --cv folds' out-of-fold predictions (hpo.final.plan.threshold_rule)
ThresholdRule = Literal["fixed", "validation", "out_of_fold"]

TASKS: tuple[Task, ...] = get_args(Task)
CRITERIA_FORMULATIONS: tuple[CriteriaFormulation, ...] = get_args(CriteriaFormulation)
LONG_TEXT: tuple[LongText, ...] = get_args(LongText)
EVIDENCE_SCOPES: tuple[EvidenceScope, ...] = get_args(EvidenceScope)
POST_POOLINGS: tuple[PostPooling, ...] = get_args(PostPooling)
METRICS: tuple[Metric, ...] = get_args(Metric)
THRESHOLDS: tuple[Threshold, ...] = get_args(Threshold)
REFITS: tuple[Refit, ...] = get_args(Refit)
ENSEMBLES: tuple[Ensemble, ...] = get_args(Ensemble)
THRESHOLD_RULES: tuple[ThresholdRule, ...] = get_args(ThresholdRule)
# the refit on train + validation, as --refit spells it, and the train_on it trains with: every
# comparison reads these, so each word is written here only
REFIT_WITH_VALIDATION: Refit = "train+val"
TRAIN_WITH_VALIDATION: TrainOn = "train+validation"
REFIT_TRAIN_ON: dict[Refit, TrainOn] = {
    "train": "train",
    REFIT_WITH_VALIDATION: TRAIN_WITH_VALIDATION,
}
# a rule as finalize's lines and the study name it
RULE_NAMES: dict[ThresholdRule, str] = {
    "fixed": "fixed",
    "validation": "validation",
    "out_of_fold": "out-of-fold",
}


@dataclass(frozen=True)
class FormulationTraits:
    """What every layer may know of a formulation: data and models, which cannot see its
    behaviour (``hpo.train.formulations``), and a saved model's checks. Code outside the
    formulations asks these, never the formulation's name."""

    task: Task
    # an example is a post with one label (one logit) per symptom, not a (criterion, text) pair
    per_post: bool
    # its own way of reading a long text, which no other formulation reads (None: long_text
    # chooses); "sentences": every sentence scored per symptom and pooled per post (its head has
    # a post_pooling), so it learns from evidence sentences and ranks them itself
    reading: LongText | None
    # of the train settings only some formulations read, those it reads
    reads: frozenset[str]

    @property
    def scores_sentences(self) -> bool:
        return self.reading == "sentences"

    def can_read(self, long_text: LongText) -> bool:
        """Its own reading, or, without one, any reading no formulation keeps for itself."""
        return long_text == self.reading if self.reading else long_text not in OWN_READINGS


_TOKENS = frozenset({"pooling"})  # a formulation that pools a text's tokens
# criteria read status-0 annotations as hard negatives; the evidence task has them as its
# negatives already
_POSTS = _TOKENS | {"hard_negative_weight"}
TRAITS: dict[Formulation, FormulationTraits] = {
    "pairs": FormulationTraits("criteria", per_post=False, reading=None, reads=_POSTS),
    "multilabel": FormulationTraits("criteria", per_post=True, reading=None, reads=_POSTS),
    "whole_post": FormulationTraits(
        "criteria",
        per_post=True,
        reading="sentences",
        reads=frozenset({"post_pooling", "evidence_loss_weight", "hard_negative_weight"}),
    ),
    "evidence": FormulationTraits("evidence", per_post=False, reading=None, reads=_TOKENS),
}
FORMULATIONS: dict[Task, tuple[Formulation, ...]] = {
    task: tuple(name for name, traits in TRAITS.items() if traits.task == task) for task in TASKS
}
# the long_text values one formulation keeps for itself
OWN_READINGS: frozenset[LongText] = frozenset(
    traits.reading for traits in TRAITS.values() if traits.reading is not None
)


def formulation_for(task: Task, criteria_formulation: CriteriaFormulation) -> Formulation:
    """How ``task`` is put to the model: criteria as the chosen formulation, evidence as its own."""
    return criteria_formulation if task == "criteria" else "evidence"


def task_of(formulation: Formulation) -> Task:
    """criteria or evidence: what ``formulation`` is for."""
    return TRAITS[formulation].task


__all__ = [
    "CRITERIA_FORMULATIONS",
    "ENSEMBLES",
    "EVIDENCE_SCOPES",
    "FORMULATIONS",
    "LONG_TEXT",
    "METRICS",
    "OWN_READINGS",
    "POST_POOLINGS",
    "REFITS",
    "REFIT_TRAIN_ON",
    "REFIT_WITH_VALIDATION",
    "RULE_NAMES",
    "TASKS",
    "THRESHOLDS",
    "THRESHOLD_RULES",
    "TRAIN_WITH_VALIDATION",
    "TRAITS",
    "TUNED_PREFIX",
    "CriteriaFormulation",
    "Ensemble",
    "EvidenceScope",
    "Formulation",
    "FormulationTraits",
    "LongText",
    "Metric",
    "PostPooling",
    "Refit",
    "Task",
    "Threshold",
    "ThresholdRule",
    "TrainOn",
    "formulation_for",
    "task_of",
]
