"""The formulations are one thing each: a vocabulary word with its traits and one module of
hpo.train.formulations, and nothing else in hpo compares a formulation's name (issue #57)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import hpo
from hpo.data import load_descriptions, load_redsm5
from hpo.errors import UsageError
from hpo.train.formulations import BaseFormulation, build_examples, formulation_of
from hpo.vocabulary import CRITERIA_FORMULATIONS, FORMULATIONS, TRAITS
from tests.support.redsm5_files import write_fixture

PACKAGE = Path(hpo.__file__).parent
# where a formulation's name may be compared: its word and its module
ALLOWED = (PACKAGE / "vocabulary.py", PACKAGE / "train" / "formulations")
# "evidence" is also a task's name: a task may be compared, so only a name that is a
# formulation's alone counts when it stands alone
NAMES = frozenset(TRAITS) - {"evidence"}
HOLDERS = frozenset({"formulation", "criteria_formulation"})


def _names_in(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {v for element in node.elts for v in _names_in(element)}
    return set()


def _holds_formulation(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in HOLDERS) or (
        isinstance(node, ast.Name) and node.id in HOLDERS
    )


def name_comparisons(source: str) -> list[int]:
    """Lines comparing a formulation's name: with a name only a formulation has, or a value
    that holds a formulation with any string."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        strings = set().union(*(_names_in(o) for o in operands))
        if strings & NAMES or (strings and any(map(_holds_formulation, operands))):
            lines.append(node.lineno)
    return lines


def test_the_check_finds_the_comparisons_it_forbids():
    found = name_comparisons(
        'if config.formulation == "whole_post": pass\n'
        'if split.formulation != "evidence": pass\n'
        'if f in ("multilabel", "whole_post"): pass\n'
        'if task == "evidence": pass\n'
        "if settings.traits.per_post: pass\n"
    )
    assert found == [1, 2, 3]


def test_no_module_outside_the_formulations_compares_a_formulation_name():
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not any(path == allowed or allowed in path.parents for allowed in ALLOWED)
        for line in name_comparisons(path.read_text())
    ]
    assert offenders == []


@pytest.mark.parametrize("name", list(TRAITS))
def test_every_formulation_word_has_its_module_and_its_traits(name):
    formulation = formulation_of(name)
    assert isinstance(formulation, BaseFormulation)
    assert formulation.name == name
    assert formulation.traits is TRAITS[name]
    assert name in FORMULATIONS[TRAITS[name].task]


def test_the_criteria_formulations_describe_one_post_by_symptom_matrix(tmp_path):
    from hpo.data import SYMPTOMS, load_descriptions, load_redsm5
    from hpo.fixtures import write_sample

    corpus = load_redsm5(write_sample(tmp_path, posts=40, seed=3))
    descriptions = load_descriptions()
    matrices = {}
    for name in CRITERIA_FORMULATIONS:
        examples = build_examples(corpus, "criteria", descriptions, formulation=name)
        cells = {}
        for example in examples:
            if TRAITS[name].per_post:
                cells.update(
                    {(example.post_id, s): v for s, v in zip(SYMPTOMS, example.label, strict=True)}
                )
            else:
                cells[(example.post_id, example.criterion)] = example.label
        matrices[name] = cells
    first, *others = matrices.values()
    assert sum(first.values()) > 0
    assert all(other == first for other in others)


def test_unknown_task_lists_valid_ones(tmp_path):
    corpus = load_redsm5(write_fixture(tmp_path))
    with pytest.raises(
        UsageError, match="unknown task 'sentiment'; choose one of criteria, evidence"
    ):
        build_examples(corpus, "sentiment", load_descriptions())
