"""Errors users can act on: exit codes by kind, the cause found in a re-raised chain, and a
meta-tensor error that names what was not restored."""

from __future__ import annotations

import pytest

from hpo.errors import (
    DataError,
    MetaTensorError,
    NonFiniteWeights,
    RunStopped,
    StudyBusy,
    UsageError,
    find_cause,
)


@pytest.mark.parametrize(
    ("error", "code"),
    [(UsageError, 2), (DataError, 2), (NonFiniteWeights, 2), (RunStopped, 1), (StudyBusy, 1)],
)
def test_bad_input_exits_2_and_a_stop_or_a_busy_study_exits_1(error, code):
    assert issubclass(error, UsageError) and error("x").exit_code == code


def test_find_cause_walks_causes_and_contexts_from_the_error_itself():
    def chained() -> BaseException:
        try:
            try:
                raise DataError("the file is empty")
            except DataError as inner:
                raise ValueError("while reading") from inner
        except ValueError:
            try:
                raise RuntimeError("wrapped by a library")  # context, not cause
            except RuntimeError as outer:
                return outer

    outer = chained()
    found = find_cause(outer, lambda e: isinstance(e, UsageError))
    assert isinstance(found, DataError) and str(found) == "the file is empty"
    assert find_cause(outer, lambda e: isinstance(e, RuntimeError)) is outer
    assert find_cause(outer, lambda e: isinstance(e, KeyError)) is None


def test_a_meta_tensor_error_names_the_tensors_sorted_and_at_most_twenty():
    error = MetaTensorError(["b.weight", "a.bias"], context="after loading")
    assert error.names == ["a.bias", "b.weight"]
    assert str(error).startswith(
        "2 tensor(s) are on the meta device after loading and were not restored: a.bias, b.weight."
    )
    many = MetaTensorError([f"layer.{i:02d}" for i in range(25)])
    assert "layer.19 … (+5 more)" in str(many) and "layer.20" not in str(many)
    assert "never re-initialised" in str(many)
