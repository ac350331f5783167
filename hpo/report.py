"""``hpo report``: PNG plots and a Markdown summary of a study, to share without a dashboard."""

from __future__ import annotations

from pathlib import Path

from hpo.attributes import EPOCHS_RUN_ATTR, METRIC_ATTR, TASK_ATTR, WALL_SECONDS_ATTR
from hpo.errors import UsageError
from hpo.outputs import atomic_text, refuse_unsafe_output
from hpo.study import draw_plots, param_importances
from hpo.study.records import (
    best_full_trial,
    completed_trials,
    load_study_ref,
    recorded_document,
    state_counts,
)

TOP = 5
MAX_PARAM_COLUMNS = 6
DEFAULT_REPORTS_DIR = "_runs/reports"
# What a saved model's folder holds (a trial's checkpoint, finalize's model or ensemble, an
# encoder from model_paths): a report's PNGs there would travel with every copy of the model.
# Names, not hpo.models' constants: importing that package loads torch.
MODEL_FILES = ("classifier.json", "ensemble.json")
WEIGHTS = "*.safetensors"


def write_report(study_ref: str, storage: str | None, out: str | None) -> list[Path]:
    """Write the plots and ``summary.md`` for STUDY (a name or a spec file) into ``out``;
    return the files written."""
    study = load_study_ref(study_ref, storage)
    # the report needs no spec, but a study attribute edited into what is no JSON fails every
    # read of them, Optuna's plots' too: said in one line here, not as their traceback
    recorded_document(study)
    complete = completed_trials(study)
    if not complete:
        raise UsageError(
            f"study {study.study_name!r} has no completed trial yet; nothing to report"
        )
    out_dir = Path(out or Path(DEFAULT_REPORTS_DIR) / study.study_name)
    _refuse_model_folder(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot write the report to {out_dir}: {exc.strerror}; pass --out to a writable folder"
        ) from None
    summary = out_dir / "summary.md"
    refuse_unsafe_output(summary)  # before the plots: a refused report draws nothing
    metric = study.user_attrs.get(METRIC_ATTR, "value")
    importances, notes = param_importances(study, len(complete))
    charts, plot_notes = draw_plots(study, out_dir, metric, with_importances=bool(importances))
    with atomic_text(summary) as stream:
        stream.write(_summary(study, metric, complete, importances, charts, notes + plot_notes))
    return [out_dir / name for name in charts] + [summary]


def _refuse_model_folder(out_dir: Path) -> None:
    """Any folder may take a report (a new one, a shared reports/ folder, a previous report's),
    except a saved model's (its files, or weights) or one inside it: checked before anything is
    created."""
    absolute = out_dir.absolute()
    for folder in (absolute, *absolute.parents):
        names = [*MODEL_FILES, WEIGHTS] if folder == absolute else MODEL_FILES
        marker = next((found for name in names for found in sorted(folder.glob(name))), None)
        if marker is not None:
            raise UsageError(
                f"refusing to write the report into {out_dir}: "
                + ("it" if folder == absolute else f"it lies inside {folder}, which")
                + f" holds a saved model ({marker.name}); give --out a folder of its own"
            )


def _summary(
    study,
    metric: str,
    complete: list,
    importances: dict[str, float],
    charts: dict[str, str],
    notes: list[str],
) -> str:
    counts = state_counts(study)
    direction = study.direction.name.lower()
    best = best_full_trial(study)
    top = sorted(complete, key=lambda t: t.value, reverse=direction == "maximize")[:TOP]
    names = list(importances) or sorted({name for t in top for name in t.params})
    names = names[:MAX_PARAM_COLUMNS]
    lines = [
        f"# Study {study.study_name}",
        "",
        f"- task: {study.user_attrs.get(TASK_ATTR, '?')}",
        f"- direction: {direction} {metric}",
        f"- trials: complete {counts.complete}, pruned {counts.pruned}, failed {counts.failed}, "
        f"re-queued {counts.requeued}, running {counts.running}, waiting {counts.waiting}",
        f"- best: trial {best.number}, {metric} = {_fmt(best.value)}",
        "",
        f"## Top {len(top)} trials",
        "",
        "| trial | " + " | ".join([metric, *names, EPOCHS_RUN_ATTR, WALL_SECONDS_ATTR]) + " |",
        "|" + "---|" * (len(names) + 4),
    ]
    for trial in top:
        cells = [
            trial.number,
            trial.value,
            *(trial.params.get(n, "") for n in names),
            trial.user_attrs.get(EPOCHS_RUN_ATTR, ""),
            trial.user_attrs.get(WALL_SECONDS_ATTR, ""),
        ]
        lines.append("| " + " | ".join(_fmt(c) for c in cells) + " |")
    if importances:
        lines += [
            "",
            "Parameter importances: " + ", ".join(f"{k} {v:.2f}" for k, v in importances.items()),
        ]
    lines += ["", "## Plots", ""] + [f"- [{title}]({name})" for name, title in charts.items()]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def _fmt(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
