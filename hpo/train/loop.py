"""One fine-tuning run: a plain ``TrainConfig`` in, the best epoch's metrics out.

It knows nothing of Optuna. Its outward channel is ``report(step, value, metrics)``, called
after every evaluation; if it raises (a pruned trial), training stops at once. A run evaluates at
each epoch's end and, given ``Looks``, also where a look point falls inside an epoch; ``step``
counts training progress in 1/``units_per_epoch`` of an epoch (the epoch itself by default).
Where it stands (epoch, step, loss, pace, ETA) is logged every ``PROGRESS_SECONDS``, at each
look and at each epoch's end (there with the validation metric and the run's best so far), one
line each, and handed to ``progress`` (which must not raise) for whoever shows it.
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from hpo.data import SYMPTOMS, files_fingerprint, load_descriptions
from hpo.models.classifier import save_classifier
from hpo.models.device import unwrap_model
from hpo.models.inference import InferenceSettings
from hpo.train.config import TrainConfig
from hpo.train.evaluate import (
    INTERVAL_METRICS,
    Evaluation,
    evaluate,
    objective_value,
    post_intervals,
)
from hpo.train.finite import LossWatch, check_scores, what_to_change
from hpo.train.prepare import PreparedData
from hpo.train.setup import set_up

Report = Callable[
    [int, float, dict[str, float]], bool | None
]  # step (progress in Looks units), objective value, the evaluation's metrics;
# True: stop at this epoch's end and keep the best epoch so far (a spent time budget)
Progress = Callable[[dict], None]
# a long trial says where it is this often; a study of minutes-long trials is not silent
PROGRESS_SECONDS = 30.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Looks:
    """Where a run is evaluated besides its epochs' ends, in 1/``units_per_epoch`` of an epoch
    (a pass over the training sample): the pruner's rungs. An early look is a fraction of an
    epoch, not a run on a subset of the posts: the trial goes on from it with the learning-rate
    schedule of its full length, so a survivor reaches full fidelity without starting again,
    and every trial is judged at the same share of its data."""

    units_per_epoch: int = 1
    at: tuple[int, ...] = ()

    def inside(self, epoch: int) -> list[int]:
        """The look points that fall inside ``epoch`` (its end is evaluated anyway)."""
        first, end = (epoch - 1) * self.units_per_epoch, epoch * self.units_per_epoch
        return sorted(unit for unit in set(self.at) if first < unit < end)


@dataclass
class TrainResult:
    metrics: dict[
        str, float
    ]  # validation metrics of the best epoch; the test split is finalize's alone
    value: float  # the objective metric of the best epoch (its tuned_ twin with threshold: tuned)
    best_epoch: int
    epochs_run: int
    micro_batch_size: int  # after any out-of-memory back-off
    samples_trained: int
    # run start to the start of the first optimizer step (loading, data, transfer)
    setup_seconds: float
    wall_seconds: float
    train_samples_per_second: float
    peak_memory_mb: float
    tokens_trained: int = 0  # encoder input tokens of every training forward, padding excluded
    # per split: share of text tokens the model sees
    token_coverage: dict[str, float] = field(default_factory=dict)
    thresholds: dict[str, float] | None = None  # per symptom, tuned on validation at the best epoch
    history: list[dict[str, float]] = field(default_factory=list)
    checkpoint: str | None = None
    # the best epoch's objective value: its 95% bootstrap interval over the validation posts
    # (a post-level F1 only), at the thresholds it was judged at
    interval: dict | None = None


def train(
    config: TrainConfig,
    report: Report | None = None,
    progress: Progress | None = None,
    looks: Looks = Looks(),
) -> TrainResult:
    started = time.perf_counter()
    run = set_up(config)
    model, data, device = run.model, run.data, run.device
    coverage = _log_coverage(data, config)
    setup_seconds = time.perf_counter() - started  # trial start to the first optimizer step's start
    best, best_value, best_epoch, best_state, history = None, None, 0, None, []
    samples, tokens, train_seconds, stale_epochs = 0, 0, 0.0, 0
    pace = _Pace(config.epochs, run.steps_per_epoch, progress, config.objective_metric)
    fix = what_to_change(config)
    watch = LossWatch(device, fix)  # a diverged run fails at once, never a trial's best
    model.train()
    units = looks.units_per_epoch
    for epoch in range(1, config.epochs + 1):
        epoch_started = time.perf_counter()
        batches, seen, stop = list(run.batches(epoch)), 0, False
        total = sum(map(len, batches))  # the epoch's examples: posts, pairs or sentences
        due = looks.inside(epoch)
        for step, batch in enumerate(batches, start=1):
            loss, read = run.step(batch)
            samples += len(batch)
            tokens += read
            seen += len(batch)
            watch.step(epoch, step, loss)
            pace.step(epoch, step, len(batch), loss)
            # a look at the first batch end at or past its point: under one batch late
            while due and seen * units >= (due[0] - (epoch - 1) * units) * total:
                unit, look_started = due.pop(0), time.perf_counter()
                train_seconds += look_started - epoch_started
                watch.check()
                evaluation = evaluate(
                    model, data.validation, run.collate, config, device, run.autocast
                )
                check_scores(evaluation.probs, f"at the look after {unit / units:.3g} epochs", fix)
                value = objective_value(
                    evaluation.metrics, config.objective_metric, config.threshold
                )
                pace.look(unit / units, value, time.perf_counter() - look_started)
                if report is not None:  # raising (pruning) stops it at once
                    stop = bool(report(unit, value, evaluation.metrics)) or stop
                epoch_started = time.perf_counter()
        train_seconds += time.perf_counter() - epoch_started
        evaluation_started = time.perf_counter()
        watch.check()
        evaluation = evaluate(model, data.validation, run.collate, config, device, run.autocast)
        check_scores(evaluation.probs, f"after epoch {epoch}", fix)
        eval_seconds = time.perf_counter() - evaluation_started
        value = objective_value(evaluation.metrics, config.objective_metric, config.threshold)
        history.append(evaluation.metrics)
        if (
            best_value is None or value > best_value or config.train_on != "train"
        ):  # a refit keeps the last
            best, best_value, best_epoch, stale_epochs = evaluation, value, epoch, 0
            if config.checkpoint_dir:
                best_state = {
                    k: v.detach().to("cpu", copy=True)
                    for k, v in unwrap_model(model).state_dict().items()
                }
        else:
            stale_epochs += 1
        pace.epoch_end(epoch, eval_seconds, value, best_value, best_epoch)
        if report is not None and report(epoch * units, value, evaluation.metrics):
            stop = True  # raising (pruning) stops it too
        if stop:
            break
        if (
            config.early_stopping_patience is not None
            and stale_epochs >= config.early_stopping_patience
        ):
            break

    result_metrics = dict(best.metrics)
    checkpoint = None
    if best_state is not None and best_epoch != epoch:
        unwrap_model(model).load_state_dict(best_state)
    if config.checkpoint_dir:
        checkpoint = str(
            save_classifier(
                model,
                config.checkpoint_dir,
                data.tokenizer,
                inference=_inference_settings(config, best.thresholds),
            )
        )
    return TrainResult(
        metrics=result_metrics,
        value=best_value,
        best_epoch=best_epoch,
        epochs_run=len(history),
        micro_batch_size=run.micro,
        samples_trained=samples,
        setup_seconds=setup_seconds,
        wall_seconds=time.perf_counter() - started,
        train_samples_per_second=samples / max(train_seconds, 1e-9),
        peak_memory_mb=_peak_memory_mb(device),
        tokens_trained=tokens,
        token_coverage=coverage,
        thresholds=best.thresholds,
        history=history,
        checkpoint=checkpoint,
        interval=_objective_interval(data.validation, best, config),
    )


def _objective_interval(split, best: Evaluation, config: TrainConfig) -> dict | None:
    """How far the trial's value could move by which posts validation happened to hold: with
    ~150 validation posts and a handful of positives for some symptoms, two trials 0.04 apart
    may not differ."""
    if config.objective_metric not in INTERVAL_METRICS or best.probs is None:
        return None
    thresholds = best.thresholds if config.threshold == "tuned" else dict.fromkeys(SYMPTOMS, 0.5)
    metric = config.objective_metric
    return post_intervals(split, best.probs, thresholds, (metric,)).get(metric)


class _Pace:
    """Where a run stands, said every PROGRESS_SECONDS, at each look and at each epoch's end: one
    log line each (the worker's output and the trial's train.log), the look's and the epoch's
    with the validation metric (so a watcher sees whether it learns), and a dict for
    ``progress``."""

    def __init__(self, epochs: int, steps_per_epoch: int, progress: Progress | None, metric: str):
        self.epochs, self.steps_per_epoch, self.progress = epochs, steps_per_epoch, progress
        self.metric = metric  # the study's metric: what each look and epoch end is judged by
        self.started = self.said = time.perf_counter()
        self.steps_done, self.examples, self.loss = 0, 0, None
        self.eval_seconds = 0.0  # the last epoch end's evaluation, to forecast the ones left
        self.evaluating = 0.0  # every evaluation so far (looks too): not training time
        self.epoch, self.step_in_epoch = 1, 0
        self.last_look: dict | None = None
        self.best: tuple[float, int] | None = None  # the best epoch end's value, and that epoch

    def step(self, epoch: int, step: int, examples: int, loss) -> None:
        self.epoch, self.step_in_epoch, self.loss = (
            epoch,
            step,
            loss,
        )  # a tensor, read only when said
        self.steps_done += 1
        self.examples += examples
        if time.perf_counter() - self.said >= PROGRESS_SECONDS:
            self._say()

    def look(self, epochs: float, value: float, seconds: float) -> None:
        """An evaluation inside an epoch, at a pruner's rung: ``epochs`` of training done."""
        self.evaluating += seconds
        self.last_look = {"epochs": round(epochs, 4), "value": round(value, 4)}
        self._say(f"look at {epochs:.3g} epochs, {self._judged(value)}")

    def epoch_end(
        self, epoch: int, eval_seconds: float, value: float, best: float, best_epoch: int
    ) -> None:
        self.eval_seconds = eval_seconds
        self.evaluating += eval_seconds
        self.best = (best, best_epoch)
        self._say(self._judged(value), ended=True)

    def _judged(self, value: float) -> str:
        """``macro_f1 0.5512, best 0.5612 (epoch 1)``: the best only once an epoch has ended."""
        best = "" if self.best is None else f", best {self.best[0]:.4f} (epoch {self.best[1]})"
        return f"{self.metric} {value:.4f}{best}"

    def _say(self, event: str | None = None, ended: bool = False) -> None:
        self.said = now = time.perf_counter()
        elapsed = now - self.started
        per_step = (elapsed - self.evaluating) / max(self.steps_done, 1)
        steps_left = self.epochs * self.steps_per_epoch - self.steps_done
        evals_left = self.epochs - self.epoch + (0 if ended else 1)
        eta = max(0.0, steps_left * per_step + evals_left * self.eval_seconds)
        state = {
            "epoch": self.epoch,
            "epochs": self.epochs,
            "step": self.step_in_epoch,
            "steps": self.steps_per_epoch,
            "loss": None if self.loss is None else round(float(self.loss), 4),
            "examples_per_second": round(self.examples / max(elapsed, 1e-9), 2),
            "eta_seconds": round(eta, 1),
        }
        if self.last_look is not None:
            state["last_look"] = self.last_look
        if self.best is not None:
            state["best"] = {"value": round(self.best[0], 4), "epoch": self.best[1]}
        where = f"epoch {self.epoch}/{self.epochs}" + (
            " done" if ended else f", step {self.step_in_epoch}/{self.steps_per_epoch}"
        )
        log.info(
            "%s: %sloss %s, %.1f examples/s, ETA %s",
            where,
            f"{event}, " if event else "",
            state["loss"],
            state["examples_per_second"],
            clock(eta),
        )
        if self.progress is not None:
            self.progress(state)


def clock(seconds: float) -> str:
    """A duration as 1h05m, 3m07s: what a person reads in a progress line."""
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{seconds:02d}s"


def _log_coverage(data: PreparedData, config: TrainConfig) -> dict[str, float]:
    """Nothing longer than max_length is cut silently: say what share of the text tokens the
    model sees."""
    coverage = {
        name: round(split.tokens.coverage, 4)
        for name in ("train", "validation")
        if (split := getattr(data, name)) is not None
    }
    log.info(
        "the encoder sees %s of the text tokens (long_text=%s, max_length=%d)",
        ", ".join(f"{share:.1%} of {name}'s" for name, share in coverage.items()),
        config.long_text,
        config.max_length,
    )
    return coverage


def _inference_settings(config: TrainConfig, tuned: dict[str, float]) -> InferenceSettings:
    """What prediction needs to treat new text as training did, and its decision thresholds.
    The criterion descriptions travel with the model: a study may have used its own file."""
    return InferenceSettings(
        formulation=config.formulation,
        labels=tuple(SYMPTOMS),
        max_length=config.max_length,
        long_text=config.long_text,
        thresholds=tuned if config.threshold == "tuned" else dict.fromkeys(SYMPTOMS, 0.5),
        validation_thresholds=tuned,
        descriptions=load_descriptions(config.descriptions_path),
        data_fingerprint=files_fingerprint(config.data_dir),
    )  # what a criteria/evidence pair must share


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    # process peak; Linux reports KiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
