"""model_card.md for a finalized model, rendered from finalize's summary (plain data in,
text out)."""

from __future__ import annotations

import json
import sys
from importlib import metadata

from hpo.storage_url import redact

LIBRARIES = ("hpo", "torch", "transformers", "optuna", "scikit-learn", "peft")


def model_card(summary: dict) -> str:
    metric, chosen, test = summary["metric"], summary["chosen"], summary["test"]
    ensemble = summary.get("ensemble")
    which = (
        f"the average of its {len(ensemble['members'])} seeds' probabilities (one ensemble model)"
        if ensemble
        else f"seed {chosen['seed']}"
    )
    lines = [
        f"# {summary['study']}: final model",
        "",
        f"Chosen: the configuration of trial {chosen['trial']}, {which}, "
        "by mean validation "
        f"{metric} over seeds"
        + (
            f", then retrained on train + validation for {summary['refit']['epochs']} epochs"
            if summary.get("refit", {}).get("on") == "train+val"
            else ""
        )
        + ". The test split was scored once, at decision thresholds chosen on validation only.",
        "",
        *(
            [
                f"Partial search: finalized (--partial) when {summary['search']['finished']} of "
                f"{summary['search']['n_trials']} trials had finished.",
                "",
            ]
            if summary.get("search", {}).get("partial")
            else []
        ),
        *(
            [
                f"The search's time budget (`hpo tune --timeout`) ended it after "
                f"{summary['search']['finished']} of {summary['search']['n_trials']} trials.",
                "",
            ]
            if summary.get("search", {}).get("ended_by_time_budget")
            else []
        ),
        "## Data",
        "",
        (
            "- fingerprint (sha256 of the posts and annotations files): "
            f"`{summary['data_fingerprint']}`"
        ),
        *(
            f"- {name}: {size['posts']} posts, {size['examples']} examples"
            for name, size in summary["split_sizes"].items()
        ),
        "",
        "## Parameters",
        "",
        "```json",
        json.dumps(chosen["params"], indent=2, sort_keys=True),
        "```",
        "",
        "## Validation, per configuration and seed",
        "",
        f"| rank | trial | mean {metric} | sd | per seed |",
        "|---|---|---|---|---|",
        *(
            f"| {c['rank']} | {c['trial']} | {c['mean']:.4f} | {c['sd']:.4f} | "
            + ", ".join(f"seed {s['seed']}: {s['value']:.4f}" for s in c["seeds"])
            + " |"
            for c in summary["configurations"]
        ),
        "",
        *(_ensemble_rows(metric, summary) if ensemble else []),
        *(_cv_rows(metric, summary["cv"]) if summary.get("cv") else []),
        "## Test (held out, scored once)",
        "",
        "| metric | validation | test |",
        "|---|---|---|",
        *(
            f"| {name} | {_number(chosen['validation'].get(name))} | {_number(value)} |"
            for name, value in sorted(test["metrics"].items())
        ),
        "",
        "post_micro_f1 / post_macro_f1 are the post-level multi-label F1 over the nine symptoms "
        "that the ReDSM5 "
        "paper reports (criteria only); tuned_* are at the validation-chosen thresholds.",
        "",
        "### Per symptom (test, at the decision thresholds)",
        "",
        "| symptom | threshold | F1 | precision | recall | TP | FP | FN | TN |",
        "|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {name} | {test['thresholds'][name]:.3f} | {row['f1']:.3f} | "
            f"{row['precision']:.3f} | "
            f"{row['recall']:.3f} | {row['tp']} | {row['fp']} | {row['fn']} | {row['tn']} |"
            for name, row in test["per_symptom"].items()
        ),
        "",
        "## Reproduce",
        "",
        f"`{summary['command']}` (finished {summary['finished']})",
        "",
        "Libraries: "
        + ", ".join(f"{name} {version}" for name, version in summary["libraries"].items()),
        "",
    ]
    return "\n".join(lines)


def _ensemble_rows(metric: str, summary: dict) -> list[str]:
    """The chosen configuration's seeds alone and averaged, on validation."""
    seeds = summary["configurations"][0]["seeds"]
    return [
        "## Validation: each seed alone vs their ensemble",
        "",
        f"| model | {metric} |",
        "|---|---|",
        *(f"| seed {s['seed']} | {s['value']:.4f} |" for s in seeds),
        f"| ensemble (mean probability) | {summary['ensemble']['value']:.4f} |",
        "",
    ]


def _cv_rows(metric: str, cv: dict) -> list[str]:
    """--cv K: the chosen configuration on each fold of train + validation."""
    return [
        f"## Cross-validation: {cv['k']} folds of train + validation (seed {cv['seed']})",
        "",
        f"Each fold's model trained on the other {cv['k'] - 1} folds and was validated on it; "
        "a report of how much the score moves with the data, which chose nothing.",
        "",
        f"| fold | {metric} |",
        "|---|---|",
        *(f"| {i} | {value:.4f} |" for i, value in enumerate(cv["values"], start=1)),
        f"| mean ± sd | {cv['mean']:.4f} ± {cv['sd']:.4f} |",
        "",
    ]


def _number(value) -> str:
    return "" if value is None else f"{value:.4f}"


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
