"""The joined prediction's files: one JSON object per post with every symptom and the found
ones' sentences, and how a rerun recognises its own earlier output (JSON lines or report)."""

from __future__ import annotations

import json

from hpo.explain import Explanation, Finding, render_report
from hpo.explain.files import is_explanations_file, is_report_file, record
from hpo.predict import ScoredSentence

TEXT = "I can't sleep. I eat fine."
FOUND = Finding(
    "SLEEP_ISSUES", 0.9, True, (ScoredSentence(1, 0, TEXT[:14], 0.8, True, 0, 14),), 0.5
)
ABSENT = Finding("APPETITE_CHANGE", 0.1, False, (), 0.45)
POST = Explanation({"SLEEP_ISSUES": FOUND, "APPETITE_CHANGE": ABSENT})


def test_a_line_holds_every_symptom_in_label_order_and_the_found_ones_sentences():
    line = record("p1", POST)
    assert json.loads(json.dumps(line)) == line  # plain JSON
    assert line["post_id"] == "p1" and list(line["symptoms"]) == ["SLEEP_ISSUES", "APPETITE_CHANGE"]
    sleep = line["symptoms"]["SLEEP_ISSUES"]
    assert (sleep["probability"], sleep["threshold"], sleep["present"]) == (0.9, 0.5, True)
    assert sleep["evidence"] == [
        {
            "rank": 1,
            "sentence_index": 0,
            "start": 0,
            "end": 14,
            "text": "I can't sleep.",
            "score": 0.8,
            "evidence": True,
        }
    ]
    assert TEXT[sleep["evidence"][0]["start"] : sleep["evidence"][0]["end"]] == "I can't sleep."
    assert line["symptoms"]["APPETITE_CHANGE"]["evidence"] == []


def test_a_rerun_replaces_only_its_own_earlier_lines(tmp_path):
    ours = tmp_path / "out.jsonl"
    ours.write_text(json.dumps(record("p1", POST)) + "\n")
    assert is_explanations_file(ours)
    for name, text in {
        "posts.jsonl": '{"post_id": "p1", "text": "my post"}\n',
        "notes.jsonl": "not json\n",
        "list.jsonl": "[1, 2]\n",
    }.items():
        (tmp_path / name).write_text(text)
        assert not is_explanations_file(tmp_path / name), name
    assert not is_explanations_file(tmp_path / "absent.jsonl")


def test_a_rerun_replaces_only_a_report_hpo_wrote(tmp_path):
    report = tmp_path / "report.html"
    report.write_text(render_report(["p1"], [TEXT], [POST]))
    assert is_report_file(report)
    page = tmp_path / "page.html"
    page.write_text("<!DOCTYPE html><html><head><title>mine</title></head></html>")
    assert not is_report_file(page) and not is_report_file(tmp_path / "absent.html")
