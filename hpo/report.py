"""``hpo report``: PNG plots and a Markdown summary of a study, to share without a dashboard.

The only module that imports ``optuna.visualization``; plots are drawn headless (Agg).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import optuna
from optuna.trial import TrialState
from optuna.visualization import matplotlib as plots

from hpo.commands import _study_and_spec
from hpo.errors import UsageError
from hpo.study import state_counts

TOP = 5
MAX_PARAM_COLUMNS = 6


def report(study_ref: str, storage: str | None, out: str | None) -> list[Path]:
    """Write the plots and ``summary.md`` for STUDY (a name or a spec file) into ``out``;
    print and return the files written."""
    plt.switch_backend("Agg")  # servers and containers have no display
    study, _ = _study_and_spec(study_ref, storage)
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        raise UsageError(f"study {study.study_name!r} has no completed trial yet; nothing to report")
    out_dir = Path(out or Path("_runs/reports") / study.study_name)
    out_dir.mkdir(parents=True, exist_ok=True)
    metric = study.user_attrs.get("metric", "value")
    importances, notes = _importances(study, len(complete))

    charts = {"optimization_history.png": ("Optimization history",
                                           lambda: plots.plot_optimization_history(study, target_name=metric))}
    if importances:
        charts["param_importances.png"] = ("Parameter importances",
                                           lambda: plots.plot_param_importances(study, target_name=metric))
    if any(t.intermediate_values for t in study.get_trials(deepcopy=False)):
        charts["intermediate_values.png"] = ("Intermediate values (pruning)",
                                             lambda: plots.plot_intermediate_values(study))
    else:
        notes.append("intermediate values skipped: no trial reported any")
    charts["parallel_coordinate.png"] = ("Parallel coordinates",
                                         lambda: plots.plot_parallel_coordinate(study, target_name=metric))

    written = []
    with warnings.catch_warnings():  # "experimental" and matplotlib's axis-range notes: noise here
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.simplefilter("ignore", UserWarning)
        for name, (_, draw) in charts.items():
            written.append(_save(draw(), out_dir / name))
    summary = out_dir / "summary.md"
    summary.write_text(_summary(study, metric, complete, importances, charts, notes), encoding="utf-8")
    written.append(summary)
    for path in written:
        print(path)
    return written


def _importances(study: optuna.Study, n_complete: int) -> tuple[dict[str, float], list[str]]:
    if n_complete < 2:
        return {}, [f"parameter importances skipped: {n_complete} completed trial (needs at least 2)"]
    try:
        return optuna.importance.get_param_importances(study), []
    except Exception as exc:  # any evaluator failure costs one plot, not the report
        return {}, [f"parameter importances skipped: {type(exc).__name__}: {exc}"]


def _save(axes, path: Path) -> Path:
    figure = axes.figure
    legend = axes.get_legend()
    if legend is not None and len(legend.get_texts()) > 20:  # one entry per trial: unreadable past a few
        legend.remove()
    figure.set_size_inches(10, 6)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _summary(study: optuna.Study, metric: str, complete: list, importances: dict[str, float],
             charts: dict, notes: list[str]) -> str:
    counts = state_counts(study)
    best = study.best_trial
    reverse = study.direction == optuna.study.StudyDirection.MAXIMIZE
    top = sorted(complete, key=lambda t: t.value, reverse=reverse)[:TOP]
    names = list(importances) or sorted({name for t in top for name in t.params})
    names = names[:MAX_PARAM_COLUMNS]
    lines = [
        f"# Study {study.study_name}",
        "",
        f"- task: {study.user_attrs.get('task', '?')}",
        f"- direction: {study.direction.name.lower()} {metric}",
        "- trials: " + ", ".join(f"{k} {counts[k]}" for k in ("complete", "pruned", "failed", "running", "waiting")),
        f"- best: trial {best.number}, {metric} = {_fmt(best.value)}",
        "",
        f"## Top {len(top)} trials",
        "",
        "| trial | " + " | ".join([metric, *names, "epochs_run", "wall_seconds"]) + " |",
        "|" + "---|" * (len(names) + 4),
    ]
    for trial in top:
        cells = [trial.number, trial.value, *(trial.params.get(n, "") for n in names),
                 trial.user_attrs.get("epochs_run", ""), trial.user_attrs.get("wall_seconds", "")]
        lines.append("| " + " | ".join(_fmt(c) for c in cells) + " |")
    if importances:
        lines += ["", "Parameter importances: " + ", ".join(f"{k} {v:.2f}" for k, v in importances.items())]
    lines += ["", "## Plots", ""] + [f"- [{title}]({name})" for name, (title, _) in charts.items()]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def _fmt(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
