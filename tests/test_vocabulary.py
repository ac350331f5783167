"""The words every layer shares: each formulation's traits, the formulations of each task, and
the readings of a long text only one formulation keeps for itself."""

from __future__ import annotations

import pytest

from hpo.vocabulary import (
    CRITERIA_FORMULATIONS,
    FORMULATIONS,
    LONG_TEXT,
    OWN_READINGS,
    REFIT_TRAIN_ON,
    REFITS,
    RULE_NAMES,
    TASKS,
    THRESHOLD_RULES,
    TRAITS,
    formulation_for,
    task_of,
)


def test_every_task_is_put_to_the_model_by_one_of_its_formulations():
    assert FORMULATIONS == {
        "criteria": ("pairs", "multilabel", "whole_post"),
        "evidence": ("evidence",),
    }
    assert set(CRITERIA_FORMULATIONS) == set(FORMULATIONS["criteria"])
    for criteria in CRITERIA_FORMULATIONS:
        assert formulation_for("criteria", criteria) == criteria
        assert formulation_for("evidence", criteria) == "evidence"
    for task in TASKS:
        assert all(task_of(name) == task for name in FORMULATIONS[task])


def test_only_whole_post_reads_sentences_and_no_other_formulation_can():
    assert OWN_READINGS == {"sentences"}
    assert [name for name, t in TRAITS.items() if t.scores_sentences] == ["whole_post"]
    assert [name for name, t in TRAITS.items() if t.per_post] == ["multilabel", "whole_post"]
    for name, traits in TRAITS.items():
        readable = [reading for reading in LONG_TEXT if traits.can_read(reading)]
        if name == "whole_post":
            assert readable == ["sentences"]
        else:
            assert readable == ["truncate", "head_tail", "chunks"]


@pytest.mark.parametrize("name", list(TRAITS))
def test_a_formulation_reads_pooling_or_its_own_settings(name):
    reads = TRAITS[name].reads
    own = {
        "whole_post": {"post_pooling", "evidence_loss_weight", "hard_negative_weight"},
        "pairs": {"pooling", "hard_negative_weight"},
        "multilabel": {"pooling", "hard_negative_weight"},
    }
    assert reads == own.get(name, {"pooling"})


def test_every_refit_trains_on_a_named_set_and_every_rule_has_a_name():
    assert set(REFIT_TRAIN_ON) == set(REFITS)
    assert REFIT_TRAIN_ON["train+val"] == "train+validation"
    assert set(RULE_NAMES) == set(THRESHOLD_RULES) and RULE_NAMES["out_of_fold"] == "out-of-fold"
