"""Loader validation on a hand-counted fixture: what a ReDSM5 pair of files must hold, and
the one line that names what it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpo.data import (
    SPECIAL_CASE,
    SYMPTOMS,
    load_redsm5,
    normalise_symptom,
)
from hpo.errors import DataError
from tests.support.redsm5_files import (
    ANNOTATION_HEADER,
    ANNOTATIONS,
    POST_HEADER,
    POSTS,
    write_csv,
    write_fixture,
)


def load_error(directory: Path) -> str:
    with pytest.raises(DataError) as caught:
        load_redsm5(directory)
    message = str(caught.value)
    assert "\n" not in message
    return message


# --- loading ---------------------------------------------------------------------------


def test_loads_fixture_with_multiline_quoted_text(tmp_path):
    corpus = load_redsm5(write_fixture(tmp_path))
    assert list(corpus.posts) == ["p1", "p2", "p3"]
    assert corpus.posts["p1"].text == POSTS[0][1]
    assert len(corpus.annotations) == 7
    assert corpus.annotations[1].sentence_text == 'So "tired" every day.'
    assert corpus.annotations[3].symptom == SPECIAL_CASE
    assert len(corpus.fingerprint) == 64


def test_fingerprint_follows_file_bytes(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    first = load_redsm5(write_fixture(tmp_path / "a"))
    same = load_redsm5(write_fixture(tmp_path / "b"))
    changed = load_redsm5(write_fixture(tmp_path / "c", posts=[*POSTS[:2], ["p3", "Another day."]]))
    assert first.fingerprint == same.fingerprint
    assert first.fingerprint != changed.fingerprint


def test_bom_and_extra_columns_are_accepted(tmp_path):
    write_fixture(tmp_path, post_header=POST_HEADER, posts=POSTS)
    posts = tmp_path / "redsm5_posts.csv"
    posts.write_bytes(b"\xef\xbb\xbf" + posts.read_bytes())
    write_csv(
        tmp_path / "redsm5_annotations.csv",
        [*ANNOTATION_HEADER, "rater"],
        [[*row, "r1"] for row in ANNOTATIONS],
    )
    corpus = load_redsm5(tmp_path)
    assert "p1" in corpus.posts
    assert len(corpus.annotations) == 7


def test_crlf_line_endings_keep_line_numbers(tmp_path):
    write_fixture(tmp_path, posts=[*POSTS, ["p2", "again"]])
    path = tmp_path / "redsm5_posts.csv"
    path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    assert "line 7: duplicate post_id 'p2'" in load_error(tmp_path)


def test_invalid_utf8_names_the_line(tmp_path):
    write_fixture(tmp_path)
    path = tmp_path / "redsm5_annotations.csv"
    path.write_bytes(path.read_bytes() + b"p3,p3_0,caf\xe9,FATIGUE,1,latin-1\n")
    assert "redsm5_annotations.csv: line 9: not valid UTF-8" in load_error(tmp_path)


def test_typo_and_case_labels_are_normalised(tmp_path):
    rows = [row[:] for row in ANNOTATIONS]
    rows[0][3] = "LEEP_ISSUES"
    rows[1][3] = " fatigue "
    rows[6][3] = "Anhedonia"
    rows[4][3] = "depressed-mood"
    corpus = load_redsm5(write_fixture(tmp_path, annotations=rows))
    assert [a.symptom for a in corpus.annotations] == [
        "SLEEP_ISSUES",
        "FATIGUE",
        "SLEEP_ISSUES",
        SPECIAL_CASE,
        "DEPRESSED_MOOD",
        "DEPRESSED_MOOD",
        "ANHEDONIA",
    ]


def test_normalise_symptom_keeps_unknowns():
    assert normalise_symptom("sleep issues") == "SLEEP_ISSUES"
    assert normalise_symptom("LEEP_ISSUES") == "SLEEP_ISSUES"
    assert normalise_symptom("EEP_ISSUES") == "EEP_ISSUES"  # no guessing beyond the alias table


def test_missing_directory(tmp_path):
    message = load_error(tmp_path / "nowhere")
    assert "nowhere" in message and "data directory not found" in message


def test_missing_file(tmp_path):
    write_fixture(tmp_path)
    (tmp_path / "redsm5_annotations.csv").unlink()
    assert "redsm5_annotations.csv: file not found" in load_error(tmp_path)


def test_missing_column_lists_missing_and_found(tmp_path):
    header = ["post_id", "sentence_id", "sentence_text", "symptom", "status", "explanation"]
    message = load_error(write_fixture(tmp_path, annotation_header=header))
    assert "redsm5_annotations.csv: line 1: missing column(s) DSM5_symptom" in message
    assert "found: post_id, sentence_id, sentence_text, symptom, status, explanation" in message


def test_duplicated_column_is_an_error_not_the_last_one_silently(tmp_path):
    posts = [[post_id, text, "other text"] for post_id, text in POSTS]
    message = load_error(
        write_fixture(tmp_path, posts=posts, post_header=["post_id", "text", "text"])
    )
    assert "redsm5_posts.csv: line 1: column(s) text appear more than once" in message


def test_a_five_megabyte_post_loads(tmp_path):
    # ~5 MB, past csv's default field limit
    long_text = "I cannot sleep and nothing helps. " * 150_000
    corpus = load_redsm5(write_fixture(tmp_path, posts=[*POSTS[1:], ["p1", long_text]]))
    assert corpus.posts["p1"].text == long_text


def test_empty_file(tmp_path):
    write_fixture(tmp_path)
    (tmp_path / "redsm5_posts.csv").write_text("")
    assert "redsm5_posts.csv: line 1: file is empty" in load_error(tmp_path)


def test_header_without_rows(tmp_path):
    message = load_error(write_fixture(tmp_path, annotations=[]))
    assert "redsm5_annotations.csv: line 1: header only, no data rows" in message


def test_duplicate_post_id_names_both_lines(tmp_path):
    message = load_error(write_fixture(tmp_path, posts=[*POSTS, ["p2", "again"]]))
    # p1 takes lines 2-4, so p2 is line 5, p3 line 6 and the duplicate line 7.
    assert "redsm5_posts.csv: line 7: duplicate post_id 'p2' (first on line 5)" in message


@pytest.mark.parametrize(
    "text", ["   ", "\u200b\u200c\u2060", "\x00\x00", "\ufeff \u200d"], ids=repr
)
def test_empty_post_text(tmp_path, text):
    """Issue #55 item 10: a post of only zero-width characters or NUL was accepted."""
    message = load_error(write_fixture(tmp_path, posts=[*POSTS, ["p4", text]]))
    assert "line 7: post 'p4' has empty text" in message


def test_status_must_be_zero_or_one(tmp_path):
    rows = [*ANNOTATIONS, ["p3", "p3_0", "normal", "FATIGUE", "yes", ""]]
    message = load_error(write_fixture(tmp_path, annotations=rows))
    assert (
        "redsm5_annotations.csv: line 9: status 'yes' must be 0 (absent) or 1 (present)" in message
    )


def test_annotation_for_unknown_post(tmp_path):
    rows = [*ANNOTATIONS, ["p9", "p9_0", "ghost", "FATIGUE", "1", ""]]
    message = load_error(write_fixture(tmp_path, annotations=rows))
    assert "line 9: post_id 'p9' is not in redsm5_posts.csv" in message


def test_unknown_labels_are_all_listed(tmp_path):
    rows = [row[:] for row in ANNOTATIONS]
    rows[0][3] = "INSOMNIA"
    rows[2][3] = "EEP_ISSUES"
    rows[5][3] = "INSOMNIA"
    message = load_error(write_fixture(tmp_path, annotations=rows))
    assert "unknown DSM5_symptom label(s) 'INSOMNIA' (line 2), 'EEP_ISSUES' (line 4)" in message
    assert all(label in message for label in (*SYMPTOMS, SPECIAL_CASE))


def test_row_with_wrong_field_count(tmp_path):
    message = load_error(write_fixture(tmp_path, posts=[*POSTS, ["p4", "a", "b"]]))
    assert "line 7: 3 fields but the header has 2" in message
