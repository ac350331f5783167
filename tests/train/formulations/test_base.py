"""What every formulation does, and the defaults most keep: no evidence scope and no sentence
evidence, text pairs tokenized as long_text says."""

from __future__ import annotations

import dataclasses

import pytest

from hpo.data import load_descriptions, load_redsm5
from hpo.train.config import TrainConfig
from hpo.train.formulations import BaseFormulation, build_examples, formulation_of
from tests.support.redsm5_files import write_fixture

CONFIG = TrainConfig(task="criteria", encoder="x", data_dir="unused")


def test_a_formulation_must_say_how_it_builds_its_examples():
    class Nameless(BaseFormulation):
        name = "pairs"

    with pytest.raises(TypeError, match="examples"):
        Nameless()


def test_only_evidence_pairs_sentences_with_criteria_in_a_scope():
    evidence = dataclasses.replace(CONFIG, task="evidence", evidence_scope="all_criteria")
    assert formulation_of("evidence").evidence_scope(evidence) == "all_criteria"
    for name in ("pairs", "multilabel", "whole_post"):
        assert formulation_of(name).evidence_scope(CONFIG) is None


def test_only_whole_post_scores_sentences(tmp_path):
    corpus = load_redsm5(write_fixture(tmp_path))
    for name in ("pairs", "multilabel"):
        examples = build_examples(corpus, "criteria", load_descriptions(), formulation=name)
        assert formulation_of(name).sentence_evidence(examples) is None
    examples = build_examples(corpus, "criteria", load_descriptions(), formulation="whole_post")
    assert len(formulation_of("whole_post").sentence_evidence(examples)) == len(examples)


def test_the_default_tokenizes_each_example_as_its_text_pair(tmp_path, tiny_roberta):
    from hpo.models.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(tiny_roberta)
    corpus = load_redsm5(write_fixture(tmp_path))
    examples = build_examples(corpus, "criteria", load_descriptions())
    config = dataclasses.replace(CONFIG, max_length=96, cache_dir=None)
    tokens = formulation_of("pairs").tokenize(tokenizer, examples, config, cache_key="k")
    assert len(tokens) == len(examples) and tokens.labels.tolist() == [e.label for e in examples]
    first = tokenizer.decode(tokens.input_ids[0], skip_special_tokens=True)
    assert first.startswith(examples[0].text_a[:10])
    assert max(len(ids) for ids in tokens.input_ids) <= 96
