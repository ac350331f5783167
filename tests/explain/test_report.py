"""The explanation report's page: its intended-use notice, each symptom's threshold, the
uncertain marks near a threshold, sentences that are evidence for several symptoms, the
models' test figures read beside them, and the filter across posts run by a real browser.

The predictions are written out by hand (the report renders whatever the pair predicted), so
each case the page must show is there for sure; test_explain renders a real pair's."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from hpo.data import SYMPTOMS
from hpo.explain import Explanation, Finding, model_quality, render_report
from hpo.explain.figures import probability_text, threshold_text
from hpo.predict import ScoredSentence
from tests.support.headless import CHROMIUM_FLAGS
from tests.support.helpers import final_summary

TEXT = "I can't sleep and I'm exhausted. Nothing is fun. I eat fine."
SLEEP_AND_TIRED = (0, 32)  # "I can't sleep and I'm exhausted.": evidence for two symptoms
NOTHING_FUN = (33, 49)
THRESHOLDS = dict.fromkeys(SYMPTOMS, 0.5) | {"ANHEDONIA": 0.35, "FATIGUE": 0.62}


def _sentence(span: tuple[int, int], rank: int, score: float, decision: bool = True):
    start, end = span
    return ScoredSentence(rank, 0, TEXT[start:end], score, decision, start, end)


def _post(probabilities: dict[str, float], evidence: dict | None = None) -> Explanation:
    evidence = evidence or {}
    return Explanation(
        {
            s: Finding(
                s,
                p := probabilities.get(s, 0.05),
                p >= THRESHOLDS[s],
                tuple(evidence.get(s, ())) if p >= THRESHOLDS[s] else (),
                THRESHOLDS[s],
            )
            for s in SYMPTOMS
        }
    )


POSTS = {
    "p-sleep": _post(
        # SLEEP 0.53 found but near; FATIGUE 0.9 sure; ANHEDONIA 0.41 found, 0.06 above 0.35
        {"SLEEP_ISSUES": 0.53, "FATIGUE": 0.9, "ANHEDONIA": 0.41, "DEPRESSED_MOOD": 0.48},
        {
            "SLEEP_ISSUES": [_sentence(SLEEP_AND_TIRED, 1, 0.8)],
            "FATIGUE": [_sentence(SLEEP_AND_TIRED, 1, 0.7), _sentence(NOTHING_FUN, 2, 0.2, False)],
            "ANHEDONIA": [_sentence(NOTHING_FUN, 1, 0.9)],
        },
    ),
    "p-none": _post({"WORTHLESSNESS": 0.2}),  # nothing found, nothing near a threshold
}


def _page(models=()) -> str:
    return render_report(
        list(POSTS), [TEXT] * len(POSTS), list(POSTS.values()), models=list(models)
    )


def _text(html: str) -> str:
    html = re.sub(r"<(style|script)\b.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _article(html: str, post_id: str) -> str:
    return re.search(rf'<article[^>]*data-post-id="{post_id}".*?</article>', html, re.S).group(0)


def test_the_page_says_it_is_a_research_screening_aid_not_a_diagnosis():
    text = _text(_page())
    assert "Intended use: a research screening aid, not a diagnosis." in text
    # above the first post: read before any prediction
    assert text.index("not a diagnosis") < text.index("p-sleep")


def test_the_index_shows_each_symptoms_threshold_and_counts():
    page = _page()
    for symptom, threshold in THRESHOLDS.items():
        row = re.search(rf'<tr data-symptom="{symptom}">(.*?)</tr>', page).group(1)
        assert f'<td class="threshold">{threshold:.2f}</td>' in row
    anhedonia = re.search(r'<tr data-symptom="ANHEDONIA">(.*?)</tr>', page).group(1)
    assert 'href="#present=ANHEDONIA"' in anhedonia and ">1</a>" in anhedonia
    assert '<a href="#post-0">1</a>' in anhedonia  # the index lists the post where it was found
    depressed = re.search(r'<tr data-symptom="DEPRESSED_MOOD">(.*?)</tr>', page).group(1)
    assert re.search(r'href="#present=DEPRESSED_MOOD"[^>]*>0</a>', depressed)
    assert re.search(r'href="#uncertain=DEPRESSED_MOOD"[^>]*>1</a>', depressed)


def test_decisions_within_a_tenth_of_the_threshold_are_marked_uncertain():
    article = _article(_page(), "p-sleep")
    badges = {
        symptom: state
        for state, symptom in re.findall(
            r'<li class="badge ([a-z ]+)" data-symptom="([A-Z_]+)"', article
        )
    }
    assert badges["SLEEP_ISSUES"] == "present uncertain"  # 0.53 at 0.50
    assert badges["DEPRESSED_MOOD"] == "absent uncertain"  # 0.48 at 0.50
    assert badges["ANHEDONIA"] == "present uncertain"  # 0.41 at 0.35
    assert badges["FATIGUE"] == "present"  # 0.90 at 0.62
    assert badges["APPETITE_CHANGE"] == "absent"  # 0.05 at 0.50
    assert 'data-uncertain="DEPRESSED_MOOD ANHEDONIA SLEEP_ISSUES"' in article
    assert "probability 0.480, threshold 0.50: not found; within 0.1 of the threshold" in article
    assert _text(article).count("uncertain") == 3
    assert 'data-uncertain=""' in _article(_page(), "p-none")


def test_a_probability_never_reads_on_the_other_side_of_its_threshold():
    # at two decimals 0.497 (absent) and 0.504 (present) both read 0.50, the threshold itself
    posts = [_post({"DEPRESSED_MOOD": p, "FATIGUE": f}) for p, f in ((0.497, 0.6151), (0.504, 0.9))]
    page = render_report(["below", "above"], [TEXT] * 2, posts)
    shown = {
        post_id: dict(re.findall(r'data-symptom="([A-Z_]+)"[^>]*>[A-Za-z ]+ ([0-9.]+)<', article))
        for post_id in ("below", "above")
        if (article := _article(page, post_id))
    }
    assert (
        shown["below"]["DEPRESSED_MOOD"] == "0.497" and shown["above"]["DEPRESSED_MOOD"] == "0.504"
    )
    assert shown["below"]["FATIGUE"] == "0.615"  # below 0.62, where 0.62 would read as on it
    assert shown["above"]["FATIGUE"] == "0.90" and shown["below"]["APPETITE_CHANGE"] == "0.05"
    assert "probability 0.497, threshold 0.50: not found" in _article(page, "below")
    # a threshold tuned on validation is a float32 probability: shown to six decimals, and a
    # probability just below it reads below it
    tuned = 0.5375269651412964
    assert threshold_text(tuned) == "0.537527" and threshold_text(0.845) == "0.845"
    assert probability_text(0.53752, tuned) == "0.5375"
    assert probability_text(0.53753, tuned) == "0.54"  # above it, at two decimals too


def test_a_sentence_that_is_evidence_for_several_symptoms_shows_them_all():
    article = _article(_page(), "p-sleep")
    marks = re.findall(r'<mark class="evidence([a-z ]*)" data-symptoms="([A-Z_ ]+)"', article)
    assert marks == [(" several", "SLEEP_ISSUES FATIGUE"), (" several", "ANHEDONIA FATIGUE")]
    shared = article[article.index("I can&#x27;t sleep") :]
    tags = re.findall(r'<span class="tag([a-z ]*)" data-symptom="([A-Z_]+)"[^>]*>([^<]+)<', shared)
    assert tags[:2] == [("", "SLEEP_ISSUES", "Sleep issues #1"), ("", "FATIGUE", "Fatigue #1")]
    # the second sentence: found for anhedonia, and FATIGUE's rank 2 below its evidence threshold
    assert tags[2:] == [("", "ANHEDONIA", "Anhedonia #1"), (" weak", "FATIGUE", "Fatigue #2")]


def _finalized(tmp_path: Path, summary: dict) -> Path:
    model = tmp_path / "final" / "model"
    model.mkdir(parents=True)
    (tmp_path / "final" / "metrics.json").write_text(json.dumps(summary))
    return model


INTERVAL = {"level": 0.95, "resamples": 2000, "seed": 0, "posts": 149}
REAL = final_summary("cv")
SUMMARY = final_summary(  # a real one, with the figures the report reads changed
    study="criteria-real",
    metric="post_macro_f1",
    split_sizes={**REAL["split_sizes"], "test": {"posts": 149, "examples": 149}},
    test={
        **REAL["test"],
        "metrics": {"post_macro_f1": 0.595, "post_micro_f1": 0.62, "loss": 0.3},
        "intervals": {
            "post_macro_f1": {"low": 0.52, "high": 0.66, **INTERVAL},
            "post_micro_f1": {"low": 0.55, "high": 0.68, **INTERVAL},
        },
    },
)


def test_the_models_test_figures_come_from_finalizes_summary_beside_them(tmp_path):
    criteria = _finalized(tmp_path / "criteria", SUMMARY)
    evidence = _finalized(
        tmp_path / "evidence",
        final_summary(
            study="evidence-real",
            metric="average_precision",
            test={
                **REAL["test"],
                "metrics": {"average_precision": 0.688, "recall_at_3": 0.902},
                "intervals": {},
            },
        ),
    )
    found = model_quality("criteria", criteria)
    assert found.source == str(tmp_path / "criteria" / "final" / "metrics.json")
    assert [(f.name, f.value, f.low, f.high) for f in found.figures] == [
        ("post_micro_f1", 0.62, 0.55, 0.68),
        ("post_macro_f1", 0.595, 0.52, 0.66),
    ]
    models = [found, model_quality("evidence", evidence)]
    text = _text(_page(models))
    assert "post_macro_f1 0.595 (0.520–0.660)" in text
    assert "scored once on 149 test posts by hpo finalize of study criteria-real" in text
    assert "thresholds: out-of-fold" in text
    assert "average_precision 0.688 · recall_at_3 0.902" in text  # no intervals: none computed


def test_a_model_without_a_summary_beside_it_says_its_quality_is_unknown(tmp_path):
    checkpoint = tmp_path / "trial_3" / "checkpoint"
    checkpoint.mkdir(parents=True)
    # a trial's metrics.json holds validation figures only: not a test score
    (tmp_path / "trial_3" / "metrics.json").write_text(json.dumps({"value": 0.7}))
    quality = model_quality("criteria", checkpoint)
    assert quality.source is None and quality.figures == ()
    assert "No test figures" in _text(_page([quality]))


def _dom(chromium: str, url: str, profile: Path) -> str:
    run = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "address, shown",
    [
        ("", ["p-sleep", "p-none"]),
        ("#present=ANHEDONIA", ["p-sleep"]),
        ("#uncertain", ["p-sleep"]),
        ("#present=SUICIDAL_THOUGHTS", []),
    ],
)
def test_the_filter_shows_the_posts_its_address_names_in_a_browser(
    chromium, tmp_path, address, shown
):
    page = tmp_path / "report.html"
    page.write_text(_page(), encoding="utf-8")
    dom = _dom(chromium, page.as_uri() + address, tmp_path / "profile")
    visible = re.findall(r'<article class="post"(?![^>]*hidden)[^>]*data-post-id="([^"]+)"', dom)
    assert visible == shown
    line = re.search(r'<p id="shown"[^>]*>([^<]*)</p>', dom).group(1)
    assert line == (f"{len(shown)} of 2 posts shown: " if address else "All 2 posts shown.") + (
        {
            "#present=ANHEDONIA": "Anhedonia: posts where found",
            "#uncertain": "posts with any uncertain decision",
            "#present=SUICIDAL_THOUGHTS": "Suicidal thoughts: posts where found",
        }.get(address, "")
    )
