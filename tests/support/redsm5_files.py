"""A hand-counted ReDSM5 pair of files (three posts, seven annotation rows), written as CSV:
the loader's, the tasks' and the formulations' tests count their examples on it; and the rows
of such files read back, as the sample data's tests read them."""

from __future__ import annotations

import csv
from pathlib import Path

from hpo.data import SPECIAL_CASE
from hpo.data.redsm5 import ANNOTATION_COLUMNS, POST_COLUMNS

POST_HEADER = list(POST_COLUMNS)  # the layout the loader requires, in ReDSM5's column order
ANNOTATION_HEADER = list(ANNOTATION_COLUMNS)

# p1's text spans three lines and holds commas and quotes, so its record is lines 2-4.
POSTS = [
    ["p1", 'I can\'t sleep, at all.\nSo "tired" every day.\nMy doctor mentioned grief.'],
    ["p2", "Everything feels hopeless. Nothing is fun anymore."],
    ["p3", "Just a normal day at work."],
]
ANNOTATIONS = [
    ["p1", "p1_0", "I can't sleep, at all.", "SLEEP_ISSUES", "1", "insomnia"],
    ["p1", "p1_1", 'So "tired" every day.', "FATIGUE", "1", "fatigue"],
    ["p1", "p1_1", 'So "tired" every day.', "SLEEP_ISSUES", "0", "not about sleep"],
    ["p1", "p1_2", "My doctor mentioned grief.", SPECIAL_CASE, "1", "context"],
    ["p2", "p2_0", "Everything feels hopeless.", "DEPRESSED_MOOD", "0", "first rater"],
    ["p2", "p2_0", "Everything feels hopeless.", "DEPRESSED_MOOD", "1", "second rater"],
    ["p2", "p2_1", "Nothing is fun anymore.", "ANHEDONIA", "1", "anhedonia"],
]


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def write_fixture(
    directory: Path, posts=None, annotations=None, post_header=None, annotation_header=None
) -> Path:
    write_csv(
        directory / "redsm5_posts.csv",
        post_header or POST_HEADER,
        POSTS if posts is None else posts,
    )
    write_csv(
        directory / "redsm5_annotations.csv",
        annotation_header or ANNOTATION_HEADER,
        ANNOTATIONS if annotations is None else annotations,
    )
    return directory


FILES = ("redsm5_posts.csv", "redsm5_annotations.csv")


def read_rows(path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))
