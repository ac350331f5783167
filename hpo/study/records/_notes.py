"""The notes optuna-dashboard shows: the study's (its spec in brief, its budget, what a step of
the intermediate values is, and once finalized the chosen model with its test score) and each
trial's (its value and what it cost, in one line at the top of the trial's page, where the
user-attribute box shows only its first lines).

Notes are optuna-dashboard's own format (``save_note``), so they need its package, an optional
extra: without it nothing is written and the search runs as before. The study note's part
hpo writes is rewritten whole each time; anything a user adds below its closing line stays.
Writing a note is best effort: a database blip must not end a trial or a finalize.
"""

from __future__ import annotations

import logging
import warnings

import optuna

from hpo.attributes import (
    BEST_EPOCH_ATTR,
    EPOCHS_RUN_ATTR,
    FIDELITY_CHECK_ATTR,
    FINAL_ATTR,
    FINAL_SEED_SPREAD_ATTR,
    FINAL_TEST_ATTR,
    PEAK_MEMORY_ATTR,
    WALL_SECONDS_ATTR,
    WORKER_ATTR,
)
from hpo.spec import CategoricalParam, StudySpec
from hpo.study.records._metric_attrs import recorded_metrics
from hpo.study.storage._optuna_private import trial_id

log = logging.getLogger(__name__)

# Where hpo's part of the study note ends. A Markdown link reference definition, which renders
# as nothing: optuna-dashboard's Markdown shows raw HTML, an <!-- comment --> too, as text.
HPO_PART_END = '[//]: # "end of the part hpo writes: notes below this line are kept"'
# the ends notes written by earlier versions carry, so that their users' notes are kept
FORMER_PART_ENDS = ("<!-- end of the part hpo writes: notes below this line are kept -->",)


def write_study_note(study: optuna.Study, spec: StudySpec) -> None:
    """The study's note from ``spec`` and what the study records (its final model), written
    only when it changed; the objective named after the spec's metric."""
    try:
        from optuna_dashboard import get_note, save_note
    except ImportError:  # the dashboard extra is not installed: no one can read a note here
        return
    try:
        if study.metric_names != [spec.metric]:  # a study created before hpo named it
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names([spec.metric])
        before = get_note(study)
        end = next((e for e in (HPO_PART_END, *FORMER_PART_ENDS) if e in before), None)
        kept = before.split(end, 1)[1] if end else ""
        text = f"{study_note(spec, study.user_attrs)}\n\n{HPO_PART_END}{kept}"
        if text != before:
            save_note(study, text)
    except Exception as exc:
        log.warning("study %s: could not write its note (%s)", spec.name, type(exc).__name__)


def write_trial_note(
    trial: optuna.Trial, metric: str, value: float | None, outcome: str = ""
) -> None:
    """The trial's note (``trial_note``) from the attributes it recorded, if optuna-dashboard
    is installed."""
    try:
        from optuna_dashboard import save_note
    except ImportError:
        return
    try:
        # read back: attributes written in one transaction (set_user_attrs, claim) bypass the
        # live trial's own copy of them
        attrs = trial.storage.get_trial(trial_id(trial)).user_attrs
        save_note(trial, trial_note(metric, value, attrs, outcome))
    except Exception as exc:
        log.warning("trial %d: could not write its note (%s)", trial.number, type(exc).__name__)


def study_note(spec: StudySpec, attrs: dict) -> str:
    """The note's hpo part, in Markdown: the spec in brief, the budget, the units of the
    intermediate values and the attributes, and the final model once there is one."""
    judged = spec.prune_on or spec.metric
    lines = [
        f"## {spec.name}: {spec.task}, {spec.direction} validation {spec.metric}",
        "",
        f"- **Data**: `{spec.data_dir}`",
        f"- **Search space** ({len(spec.search_space)} parameters): "
        + "; ".join(f"{name} {_searched(param)}" for name, param in spec.search_space.items()),
        f"- **Training**: {_epochs(spec)}"
        + "".join(f", {key} {value}" for key, value in sorted(spec.train.items()) if key in _SHOWN),
        f"- **Sampler** {spec.sampler.name}"
        + (f" (seed {spec.sampler.seed})" if spec.sampler.seed is not None else "")
        + f", **pruner** {spec.pruner.name}"
        + (f" judging {judged}" if spec.pruner.name != "none" else ""),
        f"- **Budget**: {_budget(spec)}",
        f"- **Intermediate values**: validation {judged}; {_step(spec.pruner.units_per_epoch)}",
        "- **Trial attributes**: `metric:NAME`, each validation metric at the trial's best "
        "epoch (4 decimals); `wall_seconds`, `peak_memory_mb` and `worker` say what it cost "
        "and where it ran. Each trial's note sums these up; its artifacts hold its `train.log`.",
    ]
    if spec.fidelity is not None:
        lines.append(f"- **Low fidelity**: {_fidelity(spec, attrs.get(FIDELITY_CHECK_ATTR))}")
    if final := attrs.get(FINAL_ATTR):
        lines += ["", *_final(final, attrs)]
    return "\n".join(lines)


def _fidelity(spec: StudySpec, check: dict | None) -> str:
    """The screening setup and, once decided, what the check found."""
    fidelity = spec.fidelity
    setup = (
        f"configurations screened on {fidelity.train_share:.0%} of the training posts (a "
        f"complete run), the top {fidelity.promote:.0%} re-run in full; trials with "
        "`train_share` are those screening runs, `promoted_from` names a full run's screening"
    )
    if check is None:
        return f"{setup}. Checking first: {fidelity.check} configurations run at both fidelities"
    rho = check["rank_correlation"]
    found = (
        f"rank correlation {rho:.2f} over {check['pairs']} configurations"
        if rho is not None
        else f"no rank correlation over {check['pairs']} configurations"
    )
    if check["phase"] == "screening":
        return f"{setup}. The check found {found} (at least {fidelity.min_rank_correlation:g})"
    return (
        f"{setup}. The check found {found}, below {fidelity.min_rank_correlation:g}: every "
        "trial since is a full run"
    )


def trial_note(metric: str, value: float | None, attrs: dict, outcome: str = "") -> str:
    """One trial's note: its value and best epoch, the time and memory it took and its
    worker, then its validation metrics; ``outcome`` (e.g. "pruned after epoch 1") stands
    for the value of a trial that has none."""
    head = f"**{metric} {value:.4f}**" if value is not None else f"**{outcome}**"
    if BEST_EPOCH_ATTR in attrs:
        head += f" at epoch {attrs[BEST_EPOCH_ATTR]} of {attrs.get(EPOCHS_RUN_ATTR, '?')}"
    parts = [head]
    if WALL_SECONDS_ATTR in attrs:
        parts.append(spelled_duration(attrs[WALL_SECONDS_ATTR]))
    if PEAK_MEMORY_ATTR in attrs:
        parts.append(f"peak memory {attrs[PEAK_MEMORY_ATTR]:,.0f} MB")
    if attrs.get(WORKER_ATTR):
        parts.append(f"worker {attrs[WORKER_ATTR]}")
    lines = [" · ".join(parts)]
    if metrics := recorded_metrics(attrs):
        lines += ["", "Validation: " + " · ".join(f"{k} {v:.4f}" for k, v in metrics.items())]
    return "\n".join(lines)


_SHOWN = ("max_length", "batch_size", "long_text", "criteria_formulation", "threshold")


def _searched(param) -> str:
    if isinstance(param, CategoricalParam):
        return "{" + ", ".join(str(choice) for choice in param.choices) + "}"
    scale = " log" if param.log else ""
    return f"{param.low:g}–{param.high:g}{scale}"


def _epochs(spec: StudySpec) -> str:
    if "epochs" in spec.search_space:
        return "epochs searched"
    return f"{spec.setting('epochs')} epochs"


def _budget(spec: StudySpec) -> str:
    parts = [f"{spec.n_trials} finished trials (complete or pruned, over all workers)"]
    if spec.timeout:
        parts.append(f"a time budget of {spelled_duration(spec.timeout)}")
    if spec.timeout_per_trial:
        parts.append(f"at most {spelled_duration(spec.timeout_per_trial)} a trial")
    return ", ".join(parts)


def _step(units: int) -> str:
    if units == 1:
        return "a step is an epoch (step 2: the end of epoch 2)"
    return (
        f"a step is 1/{units} of an epoch (step {units}: the end of epoch 1, "
        f"step {2 * units}: the end of epoch 2)"
    )


def _final(final: dict, attrs: dict) -> list[str]:
    seeds = final.get("ensemble_of")
    made = f"an ensemble of {len(seeds)} seeds" if seeds else f"seed {final.get('seed')}"
    lines = [
        "## Final model (hpo finalize)",
        "",
        f"- trial {final.get('trial')}'s configuration, {made}: `{final.get('model')}`",
    ]
    for key in (FINAL_SEED_SPREAD_ATTR, FINAL_TEST_ATTR):
        if attrs.get(key):
            lines.append(f"- {attrs[key]}")
    return lines


def spelled_duration(seconds: float) -> str:
    """``1h05m``, ``1m40s``, ``45s``: the study's notes and its search plan write time so."""
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
