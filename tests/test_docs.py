"""The docs keep up with the code: every setting documented, every guarantee's test real,
every relative link resolving, and a README a newcomer reads in minutes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpo.spec import SETTABLE_FIELDS, StudySpec

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "CHANGELOG.md"]


def test_every_settable_field_is_in_the_specs_reference():
    documented = (ROOT / "docs" / "specs.md").read_text()
    fields = sorted(SETTABLE_FIELDS | set(StudySpec.model_fields))
    missing = [name for name in fields if f"`{name}`" not in documented]
    assert not missing, f"docs/specs.md does not document {missing}"


def test_every_test_a_guarantee_names_exists():
    text = (ROOT / "docs" / "guarantees.md").read_text()
    named = re.findall(r"`(?:tests/)?(test_\w+\.py)(?:::(\w+))?", text)
    assert len(named) > 20
    for file, name in named:
        path = ROOT / "tests" / file
        assert path.exists(), f"docs/guarantees.md names {file}, which does not exist"
        if name:
            assert re.search(rf"def {name}\b", path.read_text()), (
                f"docs/guarantees.md names {file}::{name}"
            )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(doc):
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
        assert (doc.parent / target).exists(), f"{doc.name} links to {target}, which does not exist"


def test_the_readme_is_a_guide_not_a_notebook():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move reference material to docs/"
