"""Every key hpo writes into a study's or a trial's attributes, each spelled once: no two
constants share a key, and the module imports nothing."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import hpo.attributes as attributes

SOURCE = Path(attributes.__file__).read_text(encoding="utf-8")


def _keys() -> dict[str, str]:
    return {
        name: value
        for name, value in vars(attributes).items()
        if name.endswith(("_ATTR", "_PREFIX")) and isinstance(value, str)
    }


def test_no_two_attributes_share_a_key():
    keys = _keys()
    assert len(keys) > 40
    by_value = collections.defaultdict(list)
    for name, value in keys.items():
        by_value[value].append(name)
    assert {value: names for value, names in by_value.items() if len(names) > 1} == {}


def test_system_keys_carry_the_hpo_namespace_where_their_section_says_so():
    sections = {}
    section = None
    for line in SOURCE.splitlines():
        if line.startswith("# --- "):
            section = line.strip("# -")
        elif section and (name := line.split(" = ")[0]) in _keys():
            sections[name] = section
    study_system = [n for n, s in sections.items() if s == "study system attributes"]
    assert study_system and all(getattr(attributes, n).startswith("hpo:") for n in study_system)
    user = [n for n, s in sections.items() if "user attributes" in s]
    assert user and not any(getattr(attributes, n).startswith("hpo:") for n in user)


def test_it_imports_nothing_but_annotations():
    imports = [
        node for node in ast.parse(SOURCE).body if isinstance(node, (ast.Import, ast.ImportFrom))
    ]
    assert [ast.unparse(node) for node in imports] == ["from __future__ import annotations"]
