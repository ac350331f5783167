"""One self-contained HTML page for a batch of joined predictions: what the page is for, the
two models' test figures, an index of the symptoms with their thresholds and a filter, then
each post with a badge per symptom and its evidence sentences highlighted in the text.

No server, no external asset: the file opens from disk in any browser and can be mailed; its
one inline script only filters the posts shown. Every piece of post text and every id is
escaped; offsets come from the prediction (``ScoredSentence.start``/``end``), so the
highlighted span is the sentence the model scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from hpo.explain.figures import probability_text, threshold_text
from hpo.explain.join import UNCERTAIN_MARGIN, Explanation, Finding
from hpo.explain.quality import ModelQuality
from hpo.explain.report_header import filter_script, models_table, notice, symptom_index
from hpo.predict import ScoredSentence

GENERATOR = "hpo predict --html"  # in a <meta>: marks a file a rerun may replace
# One hue per symptom, in the packaged label order; a tenth label would reuse the first.
COLOURS = (
    "#d94f4f",
    "#e08a2b",
    "#b9a21c",
    "#4f9d4f",
    "#2b9fa6",
    "#3f6fd1",
    "#7b55c7",
    "#c2509a",
    "#6b6b6b",
)
STYLE = """
body{font:15px/1.5 system-ui,sans-serif;margin:0 auto;max-width:64rem;\
padding:1rem 1.5rem;color:#222;background:#fafafa}
header p{color:#555;margin:.2rem 0}
.notice{background:#fff6e0;border:1px solid #e0b050;border-radius:8px;margin:.8rem 0;\
padding:.6rem 1rem}
section{margin:1rem 0}
table{border-collapse:collapse;font-size:.9rem}
th,td{border-bottom:1px solid #e4e4e4;padding:.25rem .6rem;text-align:left;vertical-align:top}
.threshold{font-variant-numeric:tabular-nums}
.about,.unknown{color:#666;font-size:.8rem}
.swatch{background:var(--c);border-radius:50%;display:inline-block;height:.7rem;\
margin-right:.4rem;width:.7rem}
a.filter.active{background:#222;border-radius:4px;color:#fff;padding:0 .3rem}
.shown{font-weight:600}
article{background:#fff;border:1px solid #ddd;border-radius:8px;margin:1rem 0;padding:.8rem 1.2rem}
article[hidden]{display:none}
h2{font-size:1rem;margin:.2rem 0 .6rem}
.badges{display:flex;flex-wrap:wrap;gap:.35rem;list-style:none;margin:0 0 .7rem;padding:0}
.badge{border:1px solid var(--c);border-radius:999px;font-size:.8rem;\
padding:.05rem .6rem;color:var(--c)}
.badge.present{background:var(--c);color:#fff;font-weight:600}
.badge.absent{opacity:.55}
.badge.uncertain{border-style:dashed;border-width:2px;opacity:1}
.badge.present.uncertain{background:color-mix(in srgb,var(--c) 60%,#fff)}
.unsure{font-size:.7rem;font-style:italic;margin-left:.3rem}
.text{white-space:pre-wrap;margin:.4rem 0}
mark.evidence{background:color-mix(in srgb,var(--c) 22%,transparent);\
border-bottom:2px solid var(--c);border-radius:3px;padding:0 .1rem;color:inherit}
mark.evidence.weak{border-bottom-style:dashed}
mark.evidence.several{border-bottom-style:double;border-bottom-width:4px}
.tag{background:var(--c);border-radius:4px;color:#fff;font-size:.65rem;font-weight:600;\
margin-left:.15rem;padding:0 .25rem;vertical-align:super}
.tag.weak{background:#fff;border:1px dashed var(--c);color:var(--c)}
.none{color:#777;font-style:italic}
"""


def render_report(
    post_ids: Sequence[str],
    texts: Sequence[str],
    explanations: Sequence[Explanation],
    subtitle: str = "",
    models: Sequence[ModelQuality] = (),
) -> str:
    """The HTML page for these posts (input order) and their joined predictions; ``models``:
    the pair's test figures (``hpo.explain.quality.model_quality``), shown above the posts."""
    colours = _colours(explanations)
    names = {symptom: _name(symptom) for symptom in colours}
    found = sum(len(post.present) for post in explanations)
    articles = "\n".join(
        _article(i, post_id, text, post, colours)
        for i, (post_id, text, post) in enumerate(zip(post_ids, texts, explanations, strict=True))
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="generator" content="{GENERATOR}">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>Symptoms and their evidence: {len(explanations)} posts</title>"
        f"<style>{STYLE}</style></head>\n"
        f"<body><header><h1>Symptoms and their evidence</h1>{notice()}"
        f"<p>{len(explanations)} posts, {found} symptoms found. "
        "Filled badge: the criteria model finds the symptom (its probability shown; found "
        "when the probability reaches the symptom's threshold). Dashed badge marked "
        f"<i>uncertain</i>: the probability lies within {UNCERTAIN_MARGIN:g} of the threshold, "
        "so the call could go either way; read the post. Highlighted: the evidence model's top "
        "sentences for each symptom found, ranked, tagged with every symptom they are evidence "
        "for (dashed: below the evidence threshold).</p>"
        f"{f'<p>{escape(subtitle)}</p>' if subtitle else ''}</header>\n"
        f"{models_table(models)}\n{symptom_index(explanations, colours, names)}\n"
        f"<main>{articles}</main>\n{filter_script()}\n</body></html>\n"
    )


def _article(index: int, post_id: str, text: str, post: Explanation, colours: dict) -> str:
    badges = "".join(
        _badge(finding, colours[symptom]) for symptom, finding in post.findings.items()
    )
    body = _highlighted(text, post, colours) if post.present else escape(text)
    none = "" if post.present else '<p class="none">No symptom found: no sentence scored.</p>'
    uncertain = " ".join(s for s, f in post.findings.items() if f.uncertain)
    return (
        f'<article class="post" id="post-{index}" data-post-id="{escape(post_id)}" '
        f'data-present="{escape(" ".join(post.present))}" data-uncertain="{escape(uncertain)}">'
        f"<h2>{index + 1}. {escape(post_id)}</h2>"
        f'<ul class="badges">{badges}</ul>{none}<p class="text">{body}</p></article>'
    )


def _badge(finding: Finding, colour: str) -> str:
    state = "present" if finding.present else "absent"
    decided = "found" if finding.present else "not found"
    probability, threshold = finding.probability, finding.threshold
    title = (
        f"probability {probability_text(probability, threshold, 3)}, "
        f"threshold {threshold_text(threshold)}: {decided}"
    )
    unsure = ""
    if finding.uncertain:
        state += " uncertain"
        title += f"; within {UNCERTAIN_MARGIN:g} of the threshold, uncertain"
        unsure = '<span class="unsure">uncertain</span>'
    return (
        f'<li class="badge {state}" data-symptom="{escape(finding.symptom)}" '
        f'style="--c:{colour}" title="{escape(title)}">'
        f"{escape(_name(finding.symptom))} {probability_text(probability, threshold)}{unsure}</li>"
    )


def _highlighted(text: str, post: Explanation, colours: dict[str, str]) -> str:
    """The post with each evidence sentence in a <mark>, tagged with every symptom it is
    evidence for and its rank there. Split sentences never overlap, so each span is marked
    once, whatever symptoms share it."""
    spans: dict[tuple[int, int], list[tuple[str, ScoredSentence]]] = {}
    for symptom in post.present:
        for sentence in post.findings[symptom].evidence:
            spans.setdefault((sentence.start, sentence.end), []).append((symptom, sentence))
    parts, cursor = [], 0
    for (start, end), marks in sorted(spans.items()):
        first = marks[0][0]  # the mark takes its first symptom's colour; the tags name them all
        kind = "" if any(sentence.decision for _, sentence in marks) else " weak"
        kind += " several" if len(marks) > 1 else ""
        names = " ".join(symptom for symptom, _ in marks)
        title = "; ".join(
            f"{_name(symptom)}: rank {s.rank}, score {s.score:.2f}" for symptom, s in marks
        )
        tags = "".join(
            f'<span class="tag{"" if s.decision else " weak"}" data-symptom="{escape(symptom)}" '
            f'style="--c:{colours[symptom]}">{escape(_name(symptom))} #{s.rank}</span>'
            for symptom, s in marks
        )
        parts.append(escape(text[cursor:start]))
        parts.append(
            f'<mark class="evidence{kind}" data-symptoms="{escape(names)}" '
            f'style="--c:{colours[first]}" '
            f'title="{escape(title)}">{escape(text[start:end])}</mark>{tags}'
        )
        cursor = end
    parts.append(escape(text[cursor:]))
    return "".join(parts)


def _colours(explanations: Sequence[Explanation]) -> dict[str, str]:
    labels = list(explanations[0].findings) if explanations else []
    return {label: COLOURS[i % len(COLOURS)] for i, label in enumerate(labels)}


def _name(symptom: str) -> str:
    return symptom.replace("_", " ").capitalize()


__all__ = ["render_report"]
