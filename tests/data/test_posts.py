"""Posts to predict on, read from a CSV or JSON-lines file."""

from __future__ import annotations

import json

import pytest

from hpo.data.posts import load_posts
from hpo.errors import DataError


def test_a_jsonl_string_may_hold_unicode_line_separators_raw(tmp_path):
    """Issue #55 item 10: U+2028 or U+0085 raw inside a JSON string is valid JSON, but
    str.splitlines cut the line there and the file read as "not valid JSON"."""
    path = tmp_path / "posts.jsonl"
    texts = ["one\u2028two", "three\u0085four", "five\u2029six"]
    lines = [
        json.dumps({"post_id": str(i), "text": t}, ensure_ascii=False) for i, t in enumerate(texts)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert [post.text for post in load_posts(path)] == texts


def test_a_csv_and_a_jsonl_file_of_the_same_posts_read_alike_in_file_order(tmp_path):
    csv_file = tmp_path / "posts.csv"
    csv_file.write_text('post_id,text\nb,"Two, with a comma"\n7,One\n', encoding="utf-8")
    jsonl_file = tmp_path / "posts.JSONL"  # the extension is read case-blind
    jsonl_file.write_text(
        '{"post_id": "b", "text": "Two, with a comma"}\n\n{"post_id": 7, "text": "One"}\n',
        encoding="utf-8",
    )
    read = [(p.post_id, p.text) for p in load_posts(csv_file)]
    assert read == [("b", "Two, with a comma"), ("7", "One")]
    assert [(p.post_id, p.text) for p in load_posts(jsonl_file)] == read


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (['{"post_id": "a", "text": "fine"}', "{not json"], "line 2: not valid JSON"),
        (['["a", "b"]'], "line 1: expected a JSON object with post_id, text, got list"),
        (['{"post_id": "a"}'], "line 1: missing field(s) text"),
        (['{"post_id": true, "text": "x"}'], "line 1: post_id must be a string or an integer"),
        (['{"post_id": "a", "text": 3}'], "line 1: text must be a string, not a number"),
        (['{"post_id": "a", "text": "\\ud800"}'], "line 1: text holds '\\ud800'"),
        (['{"post_id": "a", "text": "x"}', '{"post_id": "a", "text": "y"}'], "duplicate post_id"),
        (["", "  "], "file is empty"),
    ],
)
def test_a_bad_jsonl_file_is_one_line_naming_where(tmp_path, lines, expected):
    path = tmp_path / "posts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        load_posts(path)
    message = str(caught.value)
    assert expected in message and str(path) in message and "\n" not in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # read leniently, posts 2 and 3 became part of post 1's text: one post, exit 0
        (
            'post_id,text\n1,"I feel low\n2,second post\n3,third post\n',
            "line 2: a quoted field that starts here is never closed",
        ),
        ('post_id,text\n1,ok\n2,"quoted" then more\n', "line 3: malformed CSV"),
    ],
)
def test_a_csv_quote_left_open_or_stray_is_refused_not_read_into_one_post(tmp_path, text, expected):
    path = tmp_path / "posts.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as caught:
        load_posts(path)
    message = str(caught.value)
    assert expected in message and str(path) in message and "\n" not in message
    assert "quot" in message.split(expected)[1], "it says what to fix"


def test_an_unknown_format_a_folder_and_a_missing_file_are_named(tmp_path):
    (tmp_path / "posts.txt").write_text("post_id,text\na,b\n")
    with pytest.raises(DataError, match="unknown input format '.txt'"):
        load_posts(tmp_path / "posts.txt")
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(DataError, match="is a folder, not a file"):
        load_posts(tmp_path / "folder.csv")
    with pytest.raises(DataError, match="file not found"):
        load_posts(tmp_path / "absent.jsonl")
