"""finalize's result in the study, so optuna-dashboard shows it beside the search: the summary's
gist as the ``final`` user attribute, the seeds' spread and the test figures as two plain lines
(the dashboard's Study User Attributes table shows a string whole, a dict cut short), the card
and metrics.json as artifacts, and the study note's closing section."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hpo.attributes import FINAL_ATTR, FINAL_SEED_SPREAD_ATTR, FINAL_TEST_ATTR
from hpo.final.summary import Configuration, FinalSummary, TestScores
from hpo.spec import StudySpec
from hpo.study.records import artifact_store, upload, write_study_note
from hpo.vocabulary import RULE_NAMES, ThresholdRule


def record(study, spec: StudySpec, final_dir: Path, summary: FinalSummary) -> None:
    """The study's record of the final in ``final_dir``."""
    store = artifact_store(spec.output_dir)
    chosen, best = summary.chosen, summary.best
    study.set_user_attr(
        FINAL_ATTR,
        {
            "trial": chosen.trial,
            "seed": chosen.seed,  # None: the ensemble of the configuration's seeds
            "ensemble_of": summary.ensemble.members if summary.ensemble else None,
            "model": str(final_dir / "model"),
            f"validation_{spec.metric}_mean": round(best.mean, 6),
            f"validation_{spec.metric}_seeds": [round(s.value, 6) for s in best.seeds],
            # every retrained configuration's, so hpo best shows the best trial's own spread
            f"validation_{spec.metric}_seeds_by_trial": {
                str(c.trial): [round(s.value, 6) for s in c.seeds] for c in summary.configurations
            },
            f"test_{spec.metric}": round(_test_value(spec, summary), 6),
            "test_intervals": {
                name: interval.model_dump() for name, interval in summary.test.intervals.items()
            },
            "thresholds": summary.rule,
            "model_card_artifact": upload(
                store, study, final_dir / "model_card.md", artifact_name("model_card.md", summary)
            ),
            "metrics_artifact": upload(
                store, study, final_dir / "metrics.json", artifact_name("metrics.json", summary)
            ),
        },
    )
    study.set_user_attr(FINAL_SEED_SPREAD_ATTR, seed_spread_line(spec.metric, best))
    study.set_user_attr(FINAL_TEST_ATTR, test_line(summary.metric, summary.rule, summary.test))
    write_study_note(study, spec)  # the dashboard's study note ends with the chosen model


def artifact_name(file_name: str, summary: FinalSummary) -> str:
    """The name the study's artifact of a final's ``file_name`` takes: the chosen trial and
    when finalize finished, so two finalizes of a study (a final moved aside, finalized anew)
    leave two artifacts the dashboard tells apart: model_card-trial3-20261127T145832Z.md."""
    stamp = datetime.fromisoformat(summary.finished).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    stem, suffix = file_name.rsplit(".", 1)
    return f"{stem}-trial{summary.chosen.trial}-{stamp}.{suffix}"


def seed_spread_line(metric: str, configuration: Configuration) -> str:
    """The chosen configuration's validation value over its seeds, in one line."""
    values = [s.value for s in configuration.seeds]
    return (
        f"trial {configuration.trial}'s configuration, validation {metric} over "
        f"{len(values)} seed(s): {configuration.mean:.4f} ± {configuration.sd:.4f} (sd), "
        f"min {min(values):.4f}, max {max(values):.4f}"
    )


# The ReDSM5 paper's measure (post-level macro-F1 over the nine symptoms): shown before a
# study's own metric wherever a user compares, as README and the paper quote it; the demo's
# macro_f1 counts absent cells too, and read 0.56 where this read 0.11 (issue #55 item 12).
PAPER_METRIC = "post_macro_f1"


def headline(metric: str, test: TestScores) -> tuple[str, ...]:
    """The metrics a test score leads with: the paper's where it was scored, then the study's."""
    return tuple(dict.fromkeys(m for m in (PAPER_METRIC, metric) if m in test.metrics))


def test_line(metric: str, rule: ThresholdRule | None, test: TestScores) -> str:
    """The test figures with their intervals, in one line: the paper's and the study's first."""
    names = dict.fromkeys((*headline(metric, test), metric, *test.intervals))
    shown = [test_figure(test, name) for name in names]
    return f"test, scored once at {RULE_NAMES[rule or 'fixed']} thresholds: " + "; ".join(shown)


def test_figure(test: TestScores, name: str) -> str:
    """``name``'s test value, with its interval where it has one."""
    value = test.metrics[name]
    if not (interval := test.intervals.get(name)):
        return f"{name} {value:.4f}"
    return (
        f"{name} {value:.4f} (95% CI {interval.low:.4f}-{interval.high:.4f}, "
        f"{interval.posts} posts)"
    )


def _test_value(spec: StudySpec, summary: FinalSummary) -> float:
    """The test score at the model's decision thresholds."""
    # the test metrics are at the decision thresholds; a summary written before they were
    # holds tuned_ twins at the validation thresholds, which threshold: tuned decided at
    from hpo.train.evaluate import objective_value  # torch: imported by finalize's scoring

    return objective_value(summary.test.metrics, spec.metric, summary.chosen.threshold or "fixed")
