"""What the report says before the first post: the notice, the models' test figures and the
symptom index with its filters, each built alone."""

from __future__ import annotations

import re
from html import escape

from hpo.explain import Explanation, Finding
from hpo.explain.quality import Figure, ModelQuality
from hpo.explain.report_header import filter_script, models_table, notice, symptom_index
from hpo.final.model_card import INTENDED_USE


def _explanation(probabilities: dict[str, float], thresholds: dict[str, float]) -> Explanation:
    return Explanation(
        {s: Finding(s, p, p >= thresholds[s], (), thresholds[s]) for s, p in probabilities.items()}
    )


THRESHOLDS = {"FATIGUE": 0.62, "ANHEDONIA": 0.35}
POSTS = [
    _explanation({"FATIGUE": 0.9, "ANHEDONIA": 0.05}, THRESHOLDS),  # fatigue, surely
    _explanation({"FATIGUE": 0.1, "ANHEDONIA": 0.41}, THRESHOLDS),  # anhedonia, near
    _explanation({"FATIGUE": 0.7, "ANHEDONIA": 0.3}, THRESHOLDS),  # fatigue near, anhedonia near
]
NAMES = {"FATIGUE": "Fatigue <tired>", "ANHEDONIA": "Anhedonia"}
COLOURS = {"FATIGUE": "#f00", "ANHEDONIA": "#0f0"}


def _row(html: str, symptom: str) -> str:
    return re.search(rf'<tr data-symptom="{symptom}">(.*?)</tr>', html).group(1)


def test_the_notice_is_the_model_cards_intended_use_escaped():
    text = notice()
    assert text.startswith('<aside class="notice" role="note">')
    assert f"<strong>{escape(INTENDED_USE[0])}</strong> {escape(INTENDED_USE[1])}" in text


def test_the_index_counts_each_symptom_and_links_the_posts_showing_it():
    html = symptom_index(POSTS, COLOURS, NAMES)
    fatigue, anhedonia = _row(html, "FATIGUE"), _row(html, "ANHEDONIA")
    assert '<td class="threshold">0.62</td>' in fatigue
    assert '<td class="threshold">0.35</td>' in anhedonia
    assert re.search(r'href="#present=FATIGUE"[^>]*>2</a>', fatigue)
    assert '<a href="#post-0">1</a> <a href="#post-2">3</a>' in fatigue
    assert re.search(r'href="#uncertain=FATIGUE"[^>]*>1</a>', fatigue)  # 0.7 at 0.62
    assert re.search(r'href="#uncertain=ANHEDONIA"[^>]*>2</a>', anhedonia)  # 0.41, 0.3
    assert "Fatigue &lt;tired&gt;" in fatigue and "<tired>" not in html
    assert "Any symptom found (3)" in html and "Any uncertain decision (2)" in html


def test_an_index_of_no_posts_has_no_rows():
    html = symptom_index([], COLOURS, NAMES)
    assert "data-symptom" not in html and "Any symptom found (0)" in html


def test_the_models_table_gives_figures_with_intervals_or_says_none_are_known():
    measured = ModelQuality(
        "criteria",
        "runs/<final>/model",
        "runs/final/metrics.json",
        study="criteria-real",
        test_posts=149,
        threshold_rule="out_of_fold",
        figures=(Figure("post_macro_f1", 0.595, 0.52, 0.66), Figure("loss", 0.3)),
    )
    unknown = ModelQuality("evidence", "trial_3/checkpoint", None)
    html = models_table([measured, unknown])
    assert html.count("<tr><th scope=row>") == 2
    assert "post_macro_f1 <b>0.595</b> (0.520–0.660)" in html and "loss <b>0.300</b><br>" in html
    assert "scored once on 149 test posts by hpo finalize of study criteria-real" in html
    assert "thresholds: out-of-fold" in html and "runs/&lt;final&gt;/model" in html
    assert "No test figures" in html
    assert models_table([]) == ""


def test_the_filter_script_is_one_inline_script_over_the_pages_own_elements():
    script = filter_script()
    assert script.startswith("<script>") and script.endswith("</script>")
    assert script.count("<script") == 1 and "src=" not in script and "http" not in script
    # a filter is an address (#present=ANHEDONIA), applied again whenever the address changes
    assert "present|uncertain" in script and '"hashchange"' in script
