"""The numbers the commands' options take: counts from 1, threads up to this machine's CPUs, a
time budget from a second to a year, memory up to an exbibyte."""

from __future__ import annotations

import os

import pytest
from pydantic import TypeAdapter, ValidationError

from hpo.option_types import Count, MemoryMb, Seconds, Threads


@pytest.mark.parametrize(
    ("kind", "good", "bad"),
    [
        (Count, [1, 64], [0, -3]),
        (Threads, [1, os.cpu_count() or 1], [0, (os.cpu_count() or 1) + 1]),
        (Seconds, [1, 90.5, 365 * 24 * 3600], [0.5, 365 * 24 * 3600 + 1]),
        (MemoryMb, [1, 1024**4], [0, 1024**4 + 1]),
    ],
)
def test_each_takes_its_range_and_refuses_past_it(kind, good, bad):
    adapter = TypeAdapter(kind)
    for value in good:
        assert adapter.validate_python(value) == value
    for value in bad:
        with pytest.raises(ValidationError):
            adapter.validate_python(value)


def test_a_count_is_a_whole_number():
    with pytest.raises(ValidationError):
        TypeAdapter(Count).validate_python(2.5)
