"""One line per finished trial, as a person watching a study reads it: its state, value, epochs
and time, and the few searched parameters that tell it apart; the rest are in `hpo best` and
the dashboard. Plain values in, a string out: the worker and the tune summary both use it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hpo.attributes import (
    CHECKED_ATTR,
    EPOCHS_RUN_ATTR,
    FAIL_REASON_ATTR,
    INTERVAL_ATTR,
    PROMOTED_FROM_ATTR,
    STOPPED_BY_ATTR,
    TRAIN_SHARE_ATTR,
    TWIN_OF_ATTR,
    WALL_SECONDS_ATTR,
)
from hpo.spec import CategoricalParam, StudySpec
from hpo.study.records import is_surplus

# What most moves a fine-tuning result comes first (the model, how fast it learns, how much it
# reads); the rest follow in the spec's order. A study searching 27 parameters would otherwise
# print a trial as four wrapped lines.
HEADLINE = (
    "encoder",
    "adapter",
    "learning_rate",
    "batch_size",
    "epochs",
    "criteria_formulation",
    "max_length",
    "long_text",
    "post_pooling",
    "evidence_loss_weight",
    "hard_negative_weight",
)
MAX_SHOWN = 6  # parameters on a trial's line; "+N more" says how many are left out (2 or more)
SHORT_NAMES = {  # names every fine-tuner reads at a glance
    "learning_rate": "lr",
    "batch_size": "bs",
    "weight_decay": "wd",
    "warmup_ratio": "warmup",
    "max_length": "max_len",
    "criteria_formulation": "formulation",
    "layerwise_lr_decay": "lr_decay",
    "evidence_loss_weight": "evidence_loss",
    "hard_negative_weight": "hard_negatives",
}
REASON_CHARS = 160  # a failure's reason on the line: its first line, cut to this


def searched_names(spec: StudySpec) -> list[str]:
    """The parameters the study's search space varies (a categorical with one choice does not),
    headline ones first."""
    varied = [
        name
        for name, param in spec.search_space.items()
        if not (isinstance(param, CategoricalParam) and len(param.choices) < 2)
    ]
    return [name for name in HEADLINE if name in varied] + [
        name for name in varied if name not in HEADLINE
    ]


def compact_params(
    params: Mapping[str, object], names: Sequence[str], limit: int | None = MAX_SHOWN
) -> str:
    """``encoder=deberta-v3-base lr=3.2e-05 bs=16 +19 more``: the trial's values of ``names``
    (a conditional one it did not sample is skipped), at most ``limit`` of them."""
    present = [name for name in names if name in params]
    # "+1 more" would take the room of the one it hides
    shown = present if limit is None or len(present) <= limit + 1 else present[:limit]
    words = [f"{SHORT_NAMES.get(name, name)}={_short(params[name])}" for name in shown]
    if left := len(present) - len(shown):
        words.append(f"+{left} more")
    return " ".join(words)


def trial_line(
    number: int,
    state: str,
    *,
    metric: str,
    value: float | None,
    epochs: int | None,
    seconds: float | None,
    params: str,
    reason: str | None = None,
    interval: Mapping[str, float] | None = None,
    budget_ended: bool = False,
    judged_at: str | None = None,
    fidelity: str = "",
) -> str:
    """``trial 12 COMPLETE macro_f1=0.5512, 3 epochs, 35m12s: lr=3.2e-05 bs=16`` (a failure's
    reason after the parameters); with the value's ``interval`` over the validation posts,
    ``post_macro_f1=0.5512 (95% CI 0.4100-0.6600)``: on 149 posts a trial's lead over another
    is often inside it, and the line is where a person watching first compares trials.
    ``budget_ended``: the study's time budget stopped the trial before its last epoch, so its
    value is from a shorter schedule than its parameters ask (``… 2 epochs, ended by the time
    budget, 5m10s``). ``judged_at``: where the pruner judged a pruned trial (``progress_words``),
    whose value, then, is the one it judged (``trial 5 PRUNED ap=0.4100 at 1/3 of an epoch``),
    in place of its whole epochs. ``fidelity``: what kind of run a screening study's trial is
    (``screened on 25% of the training posts``, ``full run of screened trial 7``)."""
    head = f"trial {number} {state}"
    if value is not None:
        head += f" {metric}={value:.4f}"
        if interval:
            head += f" ({interval['level']:.0%} CI {interval['low']:.4f}-{interval['high']:.4f})"
    if judged_at:
        head += f" at {judged_at}"
    facts = [head]
    if epochs is not None and not judged_at:
        facts.append(f"{epochs} epoch" + ("" if epochs == 1 else "s"))
    if budget_ended:
        facts.append("ended by the time budget")
    if fidelity:
        facts.append(fidelity)
    if seconds is not None:
        facts.append(duration(seconds))
    line = ", ".join(facts) + (f": {params}" if params else "")
    if reason:
        first = str(reason).splitlines()[0] if str(reason).strip() else str(reason)
        line += f"; reason: {first[:REASON_CHARS]}" + ("…" if len(first) > REASON_CHARS else "")
    return line


def run_kind(attrs: Mapping[str, object]) -> str:
    """A screening study's trial in words: a low-fidelity run, a check's full run, or the full
    run of a screened configuration; "" for any other trial."""
    if (share := attrs.get(TRAIN_SHARE_ATTR)) is not None:
        checked = f", checking trial {attrs[TWIN_OF_ATTR]}" if TWIN_OF_ATTR in attrs else ""
        return f"screened on {share:.0%} of the training posts{checked}"
    if (screened := attrs.get(PROMOTED_FROM_ATTR)) is not None:
        return f"full run of screened trial {screened}"
    return "full run, checking the low fidelity" if attrs.get(CHECKED_ATTR) else ""


def progress_words(step: int, units: int) -> str:
    """A report's step (in 1/``units`` of an epoch) in words: "epoch 2", or "2/9 of an epoch"
    inside one."""
    if step % units == 0:
        return f"epoch {step // units}"
    return f"{step}/{units} of an epoch" if step < units else f"{step / units:.3g} epochs"


def duration(seconds: float) -> str:
    """``12.3s`` under a minute, ``35m12s``, ``2h05m``: as a person reads a trial's time."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{seconds:02d}s"


def _short(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, str) and "/" in value:  # a hub id or a path: its last part names it
        return value.rstrip("/").rsplit("/", 1)[-1]
    return str(value)


class TrialLog:
    """A worker's line for each trial it ran (its name is the line's prefix, not in it), and what
    the worker needs to know about its last one."""

    def __init__(
        self,
        metric: str,
        names: Sequence[str],
        prune_on: str | None = None,
        units_per_epoch: int = 1,
    ):
        # the study's metric, and the searched parameters the line shows (``searched_names``);
        # a pruned trial's value is what the pruner judged: ``prune_on`` where the spec sets it
        self.metric, self.names = metric, names
        self.judged_by, self.units = prune_on or metric, units_per_epoch
        self.last_failed, self.last_reason = False, None

    def __call__(self, trial: Any) -> str | None:
        """The trial's line (``trial``: the worker's finished Optuna trial, read by its fields
        alone, so this module needs no Optuna); None for a surplus trial, never shown."""
        attrs = trial.user_attrs
        surplus = is_surplus(trial)
        self.last_failed = trial.state.name == "FAIL" and not surplus
        self.last_reason = attrs.get(FAIL_REASON_ATTR)
        if surplus:
            return None
        # Optuna keeps a pruned trial's last report as its value
        pruned_at = trial.last_step if trial.state.name == "PRUNED" else None
        return trial_line(
            trial.number,
            trial.state.name,
            metric=self.metric if pruned_at is None else self.judged_by,
            value=trial.value,
            epochs=attrs.get(EPOCHS_RUN_ATTR),
            seconds=attrs.get(WALL_SECONDS_ATTR),
            params=compact_params(trial.params, self.names),
            reason=self.last_reason,
            interval=attrs.get(INTERVAL_ATTR),
            budget_ended=STOPPED_BY_ATTR in attrs,
            judged_at=None if pruned_at is None else progress_words(pruned_at, self.units),
            fidelity=run_kind(attrs),
        )
