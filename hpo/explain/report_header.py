"""What the report says before the first post: what it is for (and not for), how good the two
models are, and an index of the symptoms with a filter across the posts.

The filter is a few lines of inline script over the page's own elements: a link such as
``#present=ANHEDONIA`` or ``#uncertain`` shows the posts it names, so a filtered view is also
an address to share. Without script every post stays shown and the links do nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from hpo.explain.figures import threshold_text
from hpo.explain.join import UNCERTAIN_MARGIN, Explanation
from hpo.explain.quality import ModelQuality
from hpo.final.model_card import INTENDED_USE

NOTICE = f"<strong>{escape(INTENDED_USE[0])}</strong> {escape(INTENDED_USE[1])}"  # the card's
ROLES = {
    "criteria": "Criteria model (which symptoms a post shows)",
    "evidence": "Evidence model (which sentences show them)",
}
# Posts are matched on the article's space-separated data-present / data-uncertain lists.
FILTER_SCRIPT = """
(function(){
var posts=[].slice.call(document.querySelectorAll("article.post"));
var shown=document.getElementById("shown");
function apply(){
 var m=/^#(present|uncertain)(?:=([A-Z_]+))?$/.exec(location.hash),n=0;
 posts.forEach(function(a){
  var names=m?a.getAttribute("data-"+m[1]).split(" ").filter(Boolean):[];
  var keep=!m||(m[2]?names.indexOf(m[2])>=0:names.length>0);
  a.hidden=!keep;n+=keep?1:0;
 });
 var link=m&&document.querySelector('a.filter[href="'+m[0]+'"]');
 document.querySelectorAll("a.filter").forEach(function(l){l.classList.toggle("active",l===link);});
 shown.textContent=m?n+" of "+posts.length+" posts shown: "+(link?link.title:m[0]):
  "All "+posts.length+" posts shown.";
}
window.addEventListener("hashchange",apply);apply();
})();
"""


def notice() -> str:
    return f'<aside class="notice" role="note">{NOTICE}</aside>'


def models_table(models: Sequence[ModelQuality]) -> str:
    """Each model's folder and its test figures, with intervals where finalize computed them."""
    if not models:
        return ""
    rows = "".join(
        f"<tr><th scope=row>{escape(ROLES.get(m.role, m.role))}</th>"
        f"<td><code>{escape(m.model)}</code></td><td>{_figures(m)}</td></tr>"
        for m in models
    )
    return (
        '<section class="models"><h2>The models and how well they did</h2><table>'
        "<tr><th>Model</th><th>Folder</th><th>On held-out test posts (95% interval)</th></tr>"
        f"{rows}</table></section>"
    )


def _figures(quality: ModelQuality) -> str:
    if quality.source is None or not quality.figures:
        return (
            '<span class="unknown">No test figures: no <code>hpo finalize</code> metrics.json '
            "beside this folder (a trial's checkpoint, or a copied model), so its quality on "
            "unseen posts is not known here.</span>"
        )
    shown = " · ".join(
        f"{escape(f.name)} <b>{f.value:.3f}</b>"
        + (f" ({f.low:.3f}–{f.high:.3f})" if f.low is not None and f.high is not None else "")
        for f in quality.figures
    )
    about = (
        f"scored once on {quality.test_posts} test posts" if quality.test_posts else "scored once"
    ) + (f" by hpo finalize of study {escape(quality.study)}" if quality.study else "")
    if quality.threshold_rule:
        about += f"; thresholds: {escape(quality.threshold_rule.replace('_', '-'))}"
    return f'{shown}<br><span class="about">{about} ({escape(quality.source)})</span>'


def symptom_index(
    explanations: Sequence[Explanation], colours: dict[str, str], names: dict[str, str]
) -> str:
    """Per symptom: its threshold, in how many posts it was found and how many decisions were
    near the threshold (each a filter), and links to the posts that show it."""
    labels = list(explanations[0].findings) if explanations else []
    rows = []
    for symptom in labels:
        findings = [(i, post.findings[symptom]) for i, post in enumerate(explanations)]
        present = [i for i, f in findings if f.present]
        uncertain = sum(f.uncertain for _, f in findings)
        links = " ".join(f'<a href="#post-{i}">{i + 1}</a>' for i in present)
        rows.append(
            f'<tr data-symptom="{escape(symptom)}"><th scope=row>'
            f'<span class="swatch" style="--c:{colours[symptom]}"></span>'
            f"{escape(names[symptom])}</th>"
            f'<td class="threshold">{threshold_text(findings[0][1].threshold)}</td>'
            f"<td>{_filter('present', symptom, len(present), names[symptom])}</td>"
            f"<td>{_filter('uncertain', symptom, uncertain, names[symptom])}</td>"
            f'<td class="posts">{links or "–"}</td></tr>'
        )
    any_present = sum(bool(post.present) for post in explanations)
    any_uncertain = sum(any(f.uncertain for f in post.findings.values()) for post in explanations)
    return (
        '<section class="index"><h2>Symptoms</h2>'
        '<p class="filters"><a class="filter" href="#" title="every post">All posts</a> · '
        f'<a class="filter" href="#present" title="posts with any symptom found">'
        f"Any symptom found ({any_present})</a> · "
        f'<a class="filter" href="#uncertain" title="posts with any uncertain decision">'
        f"Any uncertain decision ({any_uncertain})</a></p>"
        "<table><tr><th>Symptom</th><th>Threshold</th><th>Found in</th>"
        f"<th>Uncertain (±{UNCERTAIN_MARGIN:g})</th><th>Posts where found</th></tr>"
        f"{''.join(rows)}</table>"
        '<p id="shown" class="shown" aria-live="polite"></p></section>'
    )


def _filter(kind: str, symptom: str, count: int, name: str) -> str:
    words = "posts where found" if kind == "present" else "posts where the decision is uncertain"
    return (
        f'<a class="filter" href="#{kind}={escape(symptom)}" '
        f'title="{escape(name)}: {words}">{count}</a>'
    )


def filter_script() -> str:
    return f"<script>{FILTER_SCRIPT}</script>"
