"""A prediction's progress as lines where no bar is shown: one at each tenth of the posts."""

from __future__ import annotations

import re

from hpo.predict._progress import ProgressLines

LINE = re.compile(r"^scored (\d+)/(\d+) posts \((\d+)%\), [0-9.]+ posts/s, ETA \S+$")


def test_a_line_at_each_tenth_of_the_posts_and_at_the_last():
    said: list[str] = []
    progress = ProgressLines(20, what="scored", say=said.append)
    for _ in range(20):
        progress.update(1)
    assert all(LINE.match(line) for line in said), said
    done = [int(LINE.match(line).group(1)) for line in said]
    assert done == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    assert said[-1].startswith("scored 20/20 posts (100%)")


def test_a_block_past_several_tenths_says_one_line_and_the_last_block_its_own():
    said: list[str] = []
    progress = ProgressLines(200, say=said.append)
    progress.update(5)  # short of a tenth: nothing yet
    assert said == []
    progress.update(60)  # past three tenths at once: one line
    progress.update(10)  # 75: still short of the fourth tenth
    progress.update(125)
    assert [line.split(" posts")[0] for line in said] == ["predicted 65/200", "predicted 200/200"]


def test_a_handful_of_posts_says_each_one():
    said: list[str] = []
    progress = ProgressLines(3, say=said.append)
    for _ in range(3):
        progress.update(1)
    assert [line.split(" posts")[0] for line in said] == [f"predicted {n}/3" for n in (1, 2, 3)]
