"""One self-contained HTML page for a batch of joined predictions: each post with a badge per
symptom and its evidence sentences highlighted in the text.

No script, no server, no external asset: the file opens from disk in any browser and can be
mailed. Every piece of post text and every id is escaped; offsets come from the prediction
(``ScoredSentence.start``/``end``), so the highlighted span is the sentence the model scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from hpo.explain.join import Explanation, Finding
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
article{background:#fff;border:1px solid #ddd;border-radius:8px;margin:1rem 0;padding:.8rem 1.2rem}
h2{font-size:1rem;margin:.2rem 0 .6rem}
.badges{display:flex;flex-wrap:wrap;gap:.35rem;list-style:none;margin:0 0 .7rem;padding:0}
.badge{border:1px solid var(--c);border-radius:999px;font-size:.8rem;\
padding:.05rem .6rem;color:var(--c)}
.badge.present{background:var(--c);color:#fff;font-weight:600}
.badge.absent{opacity:.55}
.text{white-space:pre-wrap;margin:.4rem 0}
mark.evidence{background:color-mix(in srgb,var(--c) 22%,transparent);\
border-bottom:2px solid var(--c);
 border-radius:3px;padding:0 .1rem;color:inherit}
mark.evidence.weak{border-bottom-style:dashed}
.tag{background:var(--c);border-radius:4px;color:#fff;font-size:.65rem;font-weight:600;margin-left:.15rem;
 padding:0 .25rem;vertical-align:super}
.none{color:#777;font-style:italic}
"""


def render_report(
    post_ids: Sequence[str],
    texts: Sequence[str],
    explanations: Sequence[Explanation],
    subtitle: str = "",
) -> str:
    """The HTML page for these posts (input order) and their joined predictions."""
    colours = _colours(explanations)
    found = sum(len(post.present) for post in explanations)
    articles = "\n".join(
        _article(post_id, text, post, colours)
        for post_id, text, post in zip(post_ids, texts, explanations, strict=True)
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="generator" content="{GENERATOR}">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>Symptoms and their evidence: {len(explanations)} posts</title>"
        f"<style>{STYLE}</style></head>\n"
        f"<body><header><h1>Symptoms and their evidence</h1>"
        f"<p>{len(explanations)} posts, {found} symptoms found. "
        "Filled badge: the criteria model finds the "
        "symptom (probability shown); highlighted: the evidence model's top sentences "
        "for it, ranked "
        "(dashed: below the evidence threshold).</p>"
        f"{f'<p>{escape(subtitle)}</p>' if subtitle else ''}</header>\n{articles}\n</body></html>\n"
    )


def _article(post_id: str, text: str, post: Explanation, colours: dict[str, str]) -> str:
    badges = "".join(
        _badge(finding, colours[symptom]) for symptom, finding in post.findings.items()
    )
    body = _highlighted(text, post, colours) if post.present else escape(text)
    none = "" if post.present else '<p class="none">No symptom found: no sentence scored.</p>'
    return (
        f'<article class="post" data-post-id="{escape(post_id)}"><h2>{escape(post_id)}</h2>'
        f'<ul class="badges">{badges}</ul>{none}<p class="text">{body}</p></article>'
    )


def _badge(finding: Finding, colour: str) -> str:
    state = "present" if finding.present else "absent"
    return (
        f'<li class="badge {state}" data-symptom="{escape(finding.symptom)}" style="--c:{colour}">'
        f"{escape(_name(finding.symptom))} {finding.probability:.2f}</li>"
    )


def _highlighted(text: str, post: Explanation, colours: dict[str, str]) -> str:
    """The post with each evidence sentence in a <mark>, tagged with its symptoms and ranks.
    Split sentences never overlap, so each span is marked once, whatever symptoms share it."""
    spans: dict[tuple[int, int], list[tuple[str, ScoredSentence]]] = {}
    for symptom in post.present:
        for sentence in post.findings[symptom].evidence:
            spans.setdefault((sentence.start, sentence.end), []).append((symptom, sentence))
    parts, cursor = [], 0
    for (start, end), marks in sorted(spans.items()):
        first = marks[0][0]  # the mark takes its first symptom's colour; the tags name them all
        weak = "" if any(sentence.decision for _, sentence in marks) else " weak"
        names = " ".join(symptom for symptom, _ in marks)
        title = "; ".join(
            f"{_name(symptom)}: rank {s.rank}, score {s.score:.2f}" for symptom, s in marks
        )
        tags = "".join(
            (
                f'<span class="tag" style="--c:{colours[symptom]}">'
                f"{escape(_short(symptom))} {s.rank}</span>"
            )
            for symptom, s in marks
        )
        parts.append(escape(text[cursor:start]))
        parts.append(
            f'<mark class="evidence{weak}" data-symptoms="{escape(names)}" '
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


def _short(symptom: str) -> str:
    """A tag's label: the symptom's first word (DEPRESSED_MOOD: DEPRESSED)."""
    return symptom.split("_")[0]


__all__ = ["render_report"]
