"""bench/common.py's before-and-after rounds, shared by budget_tail and malloc_thresholds: each
side runs in its own checkout, the order alternates by round, and the worktree is removed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.common import REPO, before_and_after


def test_before_and_after_alternates_the_sides_in_their_own_checkouts():
    seen = []

    def run_side(side: str, checkout: Path, repeat: int) -> dict:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True, check=True
        ).stdout.strip()
        seen.append((side, checkout, repeat))
        return {"repeat": repeat, "head": head}

    runs = before_and_after("check", "HEAD", 3, run_side)  # a shallow clone has HEAD alone
    assert [(side, repeat) for side, _, repeat in seen] == [
        ("before", 0),
        ("after", 0),
        ("after", 1),
        ("before", 1),
        ("before", 2),
        ("after", 2),
    ]
    assert (
        [run["repeat"] for run in runs["before"]]
        == [0, 1, 2]
        == [run["repeat"] for run in runs["after"]]
    )
    after_checkouts = {checkout for side, checkout, _ in seen if side == "after"}
    (before_checkout,) = {checkout for side, checkout, _ in seen if side == "before"}
    assert after_checkouts == {REPO} and before_checkout != REPO
    head_before = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert {run["head"] for run in runs["before"]} == {head_before}
    assert not before_checkout.exists(), "the worktree is removed"
