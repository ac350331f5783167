"""Loader validation, task construction on a hand-counted fixture, and grouped splits."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hpo.data import (
    MULTILABEL,
    SPECIAL_CASE,
    SYMPTOMS,
    evidence_candidates,
    kfold_posts,
    load_descriptions,
    load_redsm5,
    normalise_symptom,
    partition,
    split_posts,
    symptom_profiles,
)
from hpo.data.redsm5 import ANNOTATION_COLUMNS, POST_COLUMNS
from hpo.data.sentences import NOT_IN_POST, split_sentences
from hpo.errors import DataError, UsageError
from hpo.fixtures import write_sample
from hpo.train.formulations import build_examples
from hpo.vocabulary import TASKS

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


# --- descriptions ------------------------------------------------------------------------


def test_packaged_descriptions_cover_the_nine():
    descriptions = load_descriptions()
    assert list(descriptions) == list(SYMPTOMS)
    assert all(text.endswith(".") for text in descriptions.values())


def test_user_descriptions_replace_packaged(tmp_path):
    path = tmp_path / "criteria.yaml"
    path.write_text("".join(f"{s.lower()}: Custom {s}.\n" for s in SYMPTOMS))
    assert load_descriptions(path)["SLEEP_ISSUES"] == "Custom SLEEP_ISSUES."


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("DEPRESSED_MOOD: sad\n", "no description for ANHEDONIA"),
        (
            "".join(f"{s}: x\n" for s in SYMPTOMS) + "SPECIAL_CASE: y\n",
            r"unknown symptom key\(s\) SPECIAL_CASE",
        ),
        ("- a list\n", "expected a mapping"),
        ("DEPRESSED_MOOD: [unclosed\n", "invalid YAML"),
    ],
)
def test_bad_user_descriptions(tmp_path, content, expected):
    path = tmp_path / "criteria.yaml"
    path.write_text(content)
    with pytest.raises(DataError, match=expected):
        load_descriptions(path)


# --- tasks -------------------------------------------------------------------------------


def test_criteria_examples_hand_counted(tmp_path):
    descriptions = load_descriptions()
    examples = build_examples(load_redsm5(write_fixture(tmp_path)), "criteria", descriptions)
    assert len(examples) == 3 * 9
    positives = {(e.post_id, e.criterion) for e in examples if e.label == 1}
    # p1: SLEEP (p1_0 status 1; the status-0 row on p1_1 does not undo it), FATIGUE;
    # p2: DEPRESSED_MOOD (one of its two rows is 1), ANHEDONIA; SPECIAL_CASE is no criterion.
    assert positives == {
        ("p1", "SLEEP_ISSUES"),
        ("p1", "FATIGUE"),
        ("p2", "DEPRESSED_MOOD"),
        ("p2", "ANHEDONIA"),
    }
    first = examples[0]
    assert (first.post_id, first.criterion) == ("p1", SYMPTOMS[0])
    assert first.text_a == descriptions[SYMPTOMS[0]] and first.text_b == POSTS[0][1]


def test_evidence_examples_hand_counted(tmp_path):
    descriptions = load_descriptions()
    examples = build_examples(load_redsm5(write_fixture(tmp_path)), "evidence", descriptions)
    got = [(e.text_b, e.criterion, e.label) for e in examples]
    sleep, tired, grief = ANNOTATIONS[0][2], ANNOTATIONS[1][2], ANNOTATIONS[3][2]
    hopeless, no_fun = ANNOTATIONS[4][2], ANNOTATIONS[6][2]
    assert got == [
        # p1 annotates SLEEP_ISSUES and FATIGUE: every p1 sentence is paired with both.
        (sleep, "SLEEP_ISSUES", 1),
        (sleep, "FATIGUE", 0),  # negative: FATIGUE is annotated elsewhere in p1
        (tired, "SLEEP_ISSUES", 0),  # its own status-0 row
        (tired, "FATIGUE", 1),
        (grief, "SLEEP_ISSUES", 0),  # SPECIAL_CASE sentence gives negatives only
        (grief, "FATIGUE", 0),
        # p2: the DEPRESSED_MOOD 0 and 1 rows collapse into one positive.
        (hopeless, "DEPRESSED_MOOD", 1),
        (hopeless, "ANHEDONIA", 0),
        (no_fun, "DEPRESSED_MOOD", 0),
        (no_fun, "ANHEDONIA", 1),
    ]
    assert {e.post_id for e in examples} == {"p1", "p2"}  # p3 has no annotations
    assert examples[0].text_a == descriptions["SLEEP_ISSUES"]


def test_multilabel_criteria_describe_the_same_matrix_as_pairs(tmp_path):
    corpus = load_redsm5(write_fixture(tmp_path))
    pairs = build_examples(corpus, "criteria", load_descriptions())
    posts = build_examples(corpus, "criteria", load_descriptions(), formulation="multilabel")
    assert [e.post_id for e in posts] == ["p1", "p2", "p3"]
    assert all(e.criterion == MULTILABEL and e.text_a is None for e in posts)
    from_pairs = {(e.post_id, e.criterion): e.label for e in pairs}
    for post in posts:
        assert post.label == tuple(from_pairs[(post.post_id, s)] for s in SYMPTOMS)
        assert post.text_b == corpus.posts[post.post_id].text


def test_evidence_covers_every_sentence_and_reports_what_does_not_align(tmp_path):
    posts = [
        ["p1", "I sleep badly. The weather was nice. I feel   worthless\nevery day. We had pizza."],
        ["p2", "Nothing here."],
    ]
    annotations = [
        ["p1", "p1_0", "I sleep badly.", "SLEEP_ISSUES", "1", ""],
        [
            "p1",
            "p1_2",
            "I feel worthless every day.",
            "WORTHLESSNESS",
            "1",
            "",
        ],  # aligns up to whitespace
        ["p1", "p1_9", "A sentence the post never had.", "WORTHLESSNESS", "1", ""],
        ["p1", "p1_3", "We had pizza.", "FATIGUE", "0", ""],  # a hard negative; FATIGUE not shown
    ]
    corpus = load_redsm5(write_fixture(tmp_path, posts=posts, annotations=annotations))
    examples, alignment = evidence_candidates(corpus, load_descriptions())
    sentences = [s.text for s in split_sentences(posts[0][1])]
    assert sentences == [
        "I sleep badly.",
        "The weather was nice.",
        "I feel   worthless",
        "every day.",
        "We had pizza.",
    ]
    got = {(e.text_b, e.criterion): (e.label, e.annotated) for e in examples}
    assert set(got) == {
        (s, c) for s in sentences for c in ("SLEEP_ISSUES", "WORTHLESSNESS")
    }  # p2 shows nothing
    assert got[("I sleep badly.", "SLEEP_ISSUES")] == (1, True)
    assert got[("I sleep badly.", "WORTHLESSNESS")] == (0, True)  # hard negative
    assert got[("I feel   worthless", "WORTHLESSNESS")] == (
        1,
        True,
    )  # the annotation spans a line break
    assert got[("every day.", "WORTHLESSNESS")] == (1, True)
    assert got[("The weather was nice.", "SLEEP_ISSUES")] == (0, False)  # nobody annotated it
    assert got[("We had pizza.", "SLEEP_ISSUES")] == (0, True)
    assert alignment.unaligned == (("p1", "p1_9", NOT_IN_POST),)
    assert "3 of 4 annotation rows aligned" in alignment.summary() and "p1_9" in alignment.summary()

    everything, _ = evidence_candidates(corpus, load_descriptions(), scope="all_criteria")
    assert len(everything) == (len(sentences) + 1) * len(SYMPTOMS)


def test_unknown_task_lists_valid_ones(tmp_path):
    corpus = load_redsm5(write_fixture(tmp_path))
    with pytest.raises(
        UsageError, match="unknown task 'sentiment'; choose one of criteria, evidence"
    ):
        build_examples(corpus, "sentiment", load_descriptions())


def test_evidence_without_criterion_annotations_is_an_error(tmp_path):
    rows = [ANNOTATIONS[3]]  # only a SPECIAL_CASE row
    corpus = load_redsm5(write_fixture(tmp_path, annotations=rows))
    with pytest.raises(DataError, match="no examples for task 'evidence'"):
        build_examples(corpus, "evidence", load_descriptions())


# --- splits ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_corpus(tmp_path_factory):
    return load_redsm5(write_sample(tmp_path_factory.mktemp("sample"), posts=200, seed=3))


def post_ids(examples) -> set[str]:
    return {e.post_id for e in examples}


def test_one_post_split_serves_both_tasks_grouped_complete_and_stratified(sample_corpus):
    profiles = symptom_profiles(sample_corpus)
    split = split_posts(profiles, seed=0)
    parts = (split.train, split.validation, split.test)
    assert sorted(p for part in parts for p in part) == sorted(sample_corpus.posts)
    assert [len(part) for part in parts] == [160, 20, 20]
    for task in TASKS:
        examples = build_examples(sample_corpus, task, load_descriptions())
        splits = partition(examples, split)
        for name, posts in zip(("train", "validation", "test"), parts, strict=True):
            assert post_ids(getattr(splits, name)) <= set(posts), (task, name)
        assert sum(len(part) for part in (splits.train, splits.validation, splits.test)) == len(
            examples
        )
    for symptom in SYMPTOMS:  # every split holds its share of every symptom's posts, within 2 posts
        overall = sum(symptom in shown for shown in profiles.values()) / len(profiles)
        for part in parts:
            assert sum(symptom in profiles[p] for p in part) == pytest.approx(
                overall * len(part), abs=2
            ), symptom


def test_splits_are_seeded(sample_corpus):
    profiles = symptom_profiles(sample_corpus)
    first, again, other = (split_posts(profiles, seed=s) for s in (7, 7, 8))
    assert first == again
    assert first.test != other.test


def test_every_requested_split_gets_a_post(tmp_path):
    profiles = symptom_profiles(load_redsm5(write_fixture(tmp_path)))
    split = split_posts(profiles, (0.8, 0.1, 0.1))
    assert [len(part) for part in (split.train, split.validation, split.test)] == [1, 1, 1]
    no_test = split_posts(profiles, (0.9, 0.1, 0.0))
    assert no_test.test == () and len(no_test.validation) == 1


def test_k_folds_hold_out_every_post_once(sample_corpus):
    profiles = symptom_profiles(sample_corpus)
    folds = kfold_posts(profiles, 5, seed=0)
    held = [p for _, out in folds for p in out]
    assert sorted(held) == sorted(profiles) and len(set(held)) == len(held)
    for kept, out in folds:
        assert not set(kept) & set(out) and len(out) == pytest.approx(40, abs=2)
    with pytest.raises(UsageError, match="2 <= K"):
        kfold_posts(profiles, 1)


@pytest.mark.parametrize(
    ("fractions", "expected"),
    [
        ((0.5, 0.3, 0.1), "sum to 1"),
        ((1.2, -0.1, -0.1), ">= 0"),
        ((0.0, 0.5, 0.5), "train fraction must be > 0"),
        ((0.5, 0.5), "three numbers"),
    ],
)
def test_bad_fractions(sample_corpus, fractions, expected):
    with pytest.raises(UsageError, match=expected):
        split_posts(symptom_profiles(sample_corpus), fractions)


def test_a_jsonl_string_may_hold_unicode_line_separators_raw(tmp_path):
    """Issue #55 item 10: U+2028 or U+0085 raw inside a JSON string is valid JSON, but
    str.splitlines cut the line there and the file read as "not valid JSON"."""
    from hpo.data.posts import load_posts

    path = tmp_path / "posts.jsonl"
    texts = ["one\u2028two", "three\u0085four", "five\u2029six"]
    lines = [
        json.dumps({"post_id": str(i), "text": t}, ensure_ascii=False) for i, t in enumerate(texts)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert [post.text for post in load_posts(path)] == texts
