"""Optuna's matplotlib plots of a study, drawn headless, for ``hpo report``."""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna

from hpo.outputs import atomic_bytes, refuse_unsafe_output


def param_importances(study: optuna.Study, n_complete: int) -> tuple[dict[str, float], list[str]]:
    """Parameter importances and notes on why there are none."""
    if n_complete < 2:
        return {}, [
            f"parameter importances skipped: {n_complete} completed trial (needs at least 2)"
        ]
    try:
        return optuna.importance.get_param_importances(study), []
    except Exception as exc:  # any evaluator failure costs one plot, not the report
        return {}, [f"parameter importances skipped: {type(exc).__name__}: {exc}"]


def draw_plots(
    study: optuna.Study, out_dir: Path, metric: str, with_importances: bool
) -> tuple[dict[str, str], list[str]]:
    """Write the study's plots as PNGs into ``out_dir``; returns {file name: title} and notes."""
    # imported here: workers never draw, and matplotlib is slow to import
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as plots

    plt.switch_backend("Agg")  # servers and containers have no display
    charts = {
        "optimization_history.png": (
            "Optimization history",
            lambda: plots.plot_optimization_history(study, target_name=metric),
        )
    }
    notes = []
    if with_importances:
        charts["param_importances.png"] = (
            "Parameter importances",
            lambda: plots.plot_param_importances(study, target_name=metric),
        )
    if any(t.intermediate_values for t in study.get_trials(deepcopy=False)):
        charts["intermediate_values.png"] = (
            "Intermediate values (pruning)",
            lambda: plots.plot_intermediate_values(study),
        )
    else:
        notes.append("intermediate values skipped: no trial reported any")
    charts["parallel_coordinate.png"] = (
        "Parallel coordinates",
        lambda: plots.plot_parallel_coordinate(study, target_name=metric),
    )
    for (
        name
    ) in charts:  # every file checked before any is drawn: a refused report leaves nothing behind
        refuse_unsafe_output(out_dir / name)
    with warnings.catch_warnings():  # "experimental" and matplotlib's axis-range notes: noise here
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.simplefilter("ignore", UserWarning)
        for name, (_, draw) in charts.items():
            _save(draw(), out_dir / name)
    return {name: title for name, (title, _) in charts.items()}, notes


def _save(axes, path: Path) -> Path:
    import matplotlib.pyplot as plt

    figure = axes.figure
    legend = axes.get_legend()
    if (
        legend is not None and len(legend.get_texts()) > 20
    ):  # one entry per trial: unreadable past a few
        legend.remove()
    figure.set_size_inches(10, 6)
    figure.tight_layout()
    with atomic_bytes(path) as stream:
        figure.savefig(stream, dpi=100, format="png")
    plt.close(figure)
    return path
