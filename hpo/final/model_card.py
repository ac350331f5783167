"""model_card.md for a finalized model, rendered from finalize's summary (plain data in,
text out)."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from typing import TypeVar

from hpo.final.summary import Configuration, CrossValidation, FinalSummary, Seed
from hpo.storage_url import redact
from hpo.vocabulary import REFIT_WITH_VALIDATION

_Part = TypeVar("_Part")
LIBRARIES = ("hpo", "torch", "transformers", "optuna", "scikit-learn", "peft")
# What a model of these tasks is for, and not for: one text, on the card and atop the HTML
# report of its predictions (hpo.explain), read before any figure.
INTENDED_USE = (
    "Intended use: a research screening aid, not a diagnosis.",
    "These are a model's readings of text, to help researchers find and review posts that may "
    "describe DSM-5 depressive symptoms. They are not a clinical assessment, they can be wrong "
    "in both directions, and they must not be used to make decisions about a person. Anyone "
    "who may be at risk needs a qualified clinician.",
)


def model_card(summary: FinalSummary) -> str:
    metric, chosen, test, search = summary.metric, summary.chosen, summary.test, summary.search
    ensemble = summary.ensemble
    which = (
        f"the average of its {len(ensemble.members)} seeds' probabilities (one ensemble model)"
        if ensemble
        else f"seed {chosen.seed}"
    )
    lines = [
        f"# {summary.study}: final model",
        "",
        f"> **{INTENDED_USE[0]}** {INTENDED_USE[1]}",
        "",
        f"Chosen: the configuration of trial {chosen.trial}, {which}, "
        "by mean validation "
        f"{metric} over seeds"
        + (
            f", then retrained on train + validation for {summary.refit.epochs} epochs"
            if summary.refit and summary.refit.on == REFIT_WITH_VALIDATION
            else ""
        )
        + ". "
        + _threshold_sentence(summary),
        "",
        *(
            [
                f"Partial search: finalized (--partial) when {search.finished} of "
                f"{search.n_trials} trials had finished.",
                "",
            ]
            if search and search.partial
            else []
        ),
        *(
            [
                f"The search's time budget (`hpo tune --timeout`) ended it after "
                f"{search.finished} of {search.n_trials} trials.",
                "",
            ]
            if search and search.ended_by_time_budget
            else []
        ),
        "## Data",
        "",
        (
            "- fingerprint (sha256 of the posts and annotations files): "
            f"`{summary.data_fingerprint}`"
        ),
        *(
            f"- {name}: {size.posts} posts, {size.examples} examples"
            for name, size in summary.split_sizes.items()
        ),
        "",
        "## Parameters",
        "",
        "```json",
        json.dumps(chosen.params, indent=2, sort_keys=True),
        "```",
        "",
        "## Validation, per configuration and seed",
        "",
        f"| rank | trial | mean {metric} | sd | per seed |",
        "|---|---|---|---|---|",
        *(
            f"| {c.rank} | {c.trial} | {c.mean:.4f} | {c.sd:.4f} | "
            + ", ".join(f"{seed_name(s)}: {s.value:.4f}" for s in c.seeds)
            + " |"
            for c in summary.configurations
        ),
        "",
        *(REUSED_NOTE if _any_reused(summary) else []),
        *(_ensemble_rows(metric, summary.best, ensemble.value) if ensemble else []),
        *(_cv_rows(metric, summary.cv) if summary.cv else []),
        *(_threshold_rows(summary) if summary.thresholds else []),
        "## Test (held out, scored once)",
        "",
        *_test_rows(summary),
        "",
        "### Per symptom (test, at the decision thresholds)",
        "",
        "Support: the symptom's positives in the test split. Where it is a handful, one post "
        "moves that symptom's F1 by a tenth or more. A dash: no figure, as its denominator is "
        "zero (recall: no positive; precision: none predicted; F1: no positive and none "
        "predicted); every count 0: the test split holds no example of the symptom.",
        "",
        "| symptom | support | threshold | F1 | precision | recall | TP | FP | FN | TN |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {name} | {row['tp'] + row['fn']} | {test.thresholds[name]:.3f} | "
            + " | ".join(_number(row[key], 3, "—") for key in ("f1", "precision", "recall"))
            + f" | {row['tp']} | {row['fp']} | {row['fn']} | {row['tn']} |"
            for name, row in test.per_symptom.items()
        ),
        "",
        "## Reproduce",
        "",
        f"`{summary.command}` (finished {summary.finished})",
        "",
        "Libraries: "
        + ", ".join(f"{name} {version}" for name, version in summary.libraries.items()),
        "",
    ]
    return "\n".join(lines)


# what each rule's thresholds are, in the card's words
RULE_WORDS = {
    "fixed": "the fixed 0.5",
    "validation": "per-symptom thresholds tuned on the validation split",
    "out_of_fold": "per-symptom thresholds chosen on out-of-fold predictions",
}
COMPARED = ("post_macro_f1", "post_micro_f1", "macro_f1")  # the comparison's rows, where present


def _threshold_sentence(summary: FinalSummary) -> str:
    """How the test split was scored, in the words of what was done."""
    rule = summary.rule
    if rule is None:  # a summary from before the rule was recorded
        return "The test split was scored once."
    if rule == "fixed":
        how = (
            "at the fixed threshold 0.5 for every symptom (the spec's threshold: fixed, and no "
            "--cv to choose per-symptom thresholds on)"
        )
    elif rule == "validation":
        posts = summary.split_sizes["validation"].posts
        how = (
            f"at per-symptom thresholds tuned on the {posts} validation posts (the spec's "
            "threshold: tuned, and no --cv to choose them on more posts)"
        )
    else:
        cv = _require(summary.cv)
        how = (
            f"at per-symptom thresholds chosen on out-of-fold predictions over the "
            f"{cv.out_of_fold.posts} train + validation posts (--cv {cv.k}), each pulled "
            f"toward 0.5 by how few positives chose it"
        )
    return (
        f"The test split was scored once, {how}; this rule follows from the flags and the "
        "spec alone, fixed before any model was trained."
    )


def _threshold_rows(summary: FinalSummary) -> list[str]:
    """The decided model on validation at each candidate set of thresholds, and the sets."""
    decided = _require(summary.thresholds)
    compared = decided.validation
    names = list(compared)
    rows = [name for name in COMPARED if name in compared[names[0]]]
    header = " | ".join(
        RULE_WORDS[name].removeprefix("the ") + (" (chosen)" if name == decided.rule else "")
        for name in names
    )
    lines = [
        "## Decision thresholds: the candidates on validation",
        "",
        "The model the test split scored"
        + (
            " (before its refit on train + validation, which has seen validation)"
            if summary.refit_on == REFIT_WITH_VALIDATION
            else ""
        )
        + ", on the validation split at each candidate set of thresholds. Tuned thresholds "
        "were chosen on validation itself, and out-of-fold ones on "
        "posts that include it, so these figures flatter both; only the test figure below is "
        "an unbiased estimate, and the rule, not these figures, chose the thresholds.",
        "",
        f"| metric | {header} |",
        "|---|" + "---|" * len(names),
        *(
            f"| {row} | " + " | ".join(_number(compared[name].get(row)) for name in names) + " |"
            for row in rows
        ),
        "",
    ]
    if summary.cv:
        oof = summary.cv.out_of_fold
        per = oof.per_symptom
        lines += [
            f"Out-of-fold thresholds: on the {oof.posts} train + validation posts, each "
            "scored by the fold model that did not train on it, the F1-best cut per symptom, "
            f"moved toward 0.5 by {oof.prior_positives} / (positives + "
            f"{oof.prior_positives}) of the way.",
            "",
            "| symptom | positives | F1-best cut | out-of-fold | validation-tuned |",
            "|---|---|---|---|---|",
            *(
                f"| {name} | {row['positives']} | {row['best_f1_threshold']:.3f} | "
                f"{row['threshold']:.3f} | "
                f"{decided.candidates['validation'][name]:.3f} |"
                for name, row in per.items()
            ),
            "",
        ]
    return lines


def _test_rows(summary: FinalSummary) -> list[str]:
    """The test metrics at the decision thresholds, the study's own first, with the F1s'
    intervals and what each metric is computed over."""
    test, validation, metric = summary.test, summary.chosen.validation, summary.metric
    intervals = test.intervals

    def interval(name: str) -> str:
        if name not in intervals:
            return ""
        found = intervals[name]
        return f"{found.low:.4f} – {found.high:.4f}"

    def row(name: str, label: str) -> str:
        value = test.metrics[name]
        return (
            f"| {label} | {_number(validation.get(name))} | {_number(value)} | {interval(name)} |"
        )

    lines = [
        "| metric | validation (same thresholds) | test | test 95% interval |",
        "|---|---|---|---|",
        row(metric, f"**{metric}** (the study's: it chose the model)"),
        *(row(name, name) for name in sorted(test.metrics) if name != metric),
        "",
        "All at the decision thresholds. " + _metric_scope(summary),
    ]
    if intervals:
        first = next(iter(intervals.values()))
        lines += [
            "",
            f"Intervals: 95% percentile bootstrap over the {first.posts} test posts "
            f"({first.resamples} resamples with replacement, seed {first.seed}"
            + ("; a post's sentences are drawn together" if summary.is_evidence else "")
            + "): how far the figure could move with another draw of test posts. The model is "
            "held fixed; seed-to-seed variation is in the validation table above.",
        ]
    return lines


def _metric_scope(summary: FinalSummary) -> str:
    """What the test metrics are computed over, so that macro_f1 and post_macro_f1 do not
    read as one figure."""
    size = summary.split_sizes["test"]
    example = "macro_f1, f1, precision, recall, accuracy, auroc and average_precision are over"
    if summary.is_evidence:
        return (
            f"{example} the test split's {size.examples} (sentence, symptom) pairs, macro_f1 "
            "the mean of the evidence and the not-evidence class's F1. recall_at_1 / "
            "recall_at_3: per (post, symptom) with evidence, the share of its evidence "
            "sentences among the 1 or 3 best scored."
        )
    scope = (
        f"{example} the test split's {size.posts * 9} (post, symptom) cells, macro_f1 the "
        "mean of the present and the absent class's F1. post_micro_f1 / post_macro_f1 are the "
        "post-level multi-label F1 over the nine symptoms that the ReDSM5 paper reports, "
        "pooled over the symptoms or averaged per symptom (a symptom without positives "
        "counts 0)."
    )
    if "evidence_recall_at_1" in summary.test.metrics:  # a whole_post model
        scope += (
            " evidence_*: how the model's own sentence scores rank each post's sentences for "
            "every symptom the post shows, against the annotated evidence, as the evidence "
            "task measures its model (average precision and AUROC over those sentences; "
            "recall_at_1 / recall_at_3 per (post, symptom) with evidence)."
        )
    return scope


def _require(part: _Part | None) -> _Part:
    """A part of the summary that the rule it records implies is there."""
    if part is None:
        raise ValueError("finalize's summary lacks a part its threshold rule implies")
    return part


def _ensemble_rows(metric: str, best: Configuration, value: float) -> list[str]:
    """The chosen configuration's seeds alone and averaged (``value``), on validation."""
    return [
        "## Validation: each seed alone vs their ensemble",
        "",
        f"| model | {metric} |",
        "|---|---|",
        *(f"| {seed_name(s)} | {s.value:.4f} |" for s in best.seeds),
        f"| ensemble (mean probability) | {value:.4f} |",
        "",
    ]


REUSED_NOTE = [
    "A seed marked reused is its trial's kept checkpoint: the search trained that model with "
    "this configuration, seed and training settings on the same split, so finalize did not "
    "train it again; its figures are the trial's (metrics to four decimals, as the study "
    "records them).",
    "",
]


def _any_reused(summary: FinalSummary) -> bool:
    return any(s.reused_from_trial is not None for c in summary.configurations for s in c.seeds)


def seed_name(seed: Seed) -> str:
    """``seed 0``, and where finalize did not retrain it, whose kept checkpoint it is."""
    if (trial := seed.reused_from_trial) is None:
        return f"seed {seed.seed}"
    return f"seed {seed.seed} (trial {trial}'s checkpoint, reused)"


def _cv_rows(metric: str, cv: CrossValidation) -> list[str]:
    """--cv K: the chosen configuration on each fold of train + validation."""
    return [
        f"## Cross-validation: {cv.k} folds of train + validation (seed {cv.seed})",
        "",
        f"Each fold's model trained on the other {cv.k - 1} folds and was validated on it; "
        "a report of how much the score moves with the data, which chose nothing.",
        "",
        f"| fold | {metric} |",
        "|---|---|",
        *(f"| {i} | {value:.4f} |" for i, value in enumerate(cv.values, start=1)),
        f"| mean ± sd | {cv.mean:.4f} ± {cv.sd:.4f} |",
        "",
    ]


def _number(value, digits: int = 4, missing: str = "") -> str:
    return missing if value is None else f"{value:.{digits}f}"


def command_line() -> str:
    """How finalize was run, for the card, with any storage password masked."""
    return " ".join(["hpo", *(redact(arg) if "://" in arg else arg for arg in sys.argv[1:])])


def library_versions() -> dict[str, str]:
    """The versions of the libraries that decide a model's numbers, for the card."""
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found
