"""The Optuna objective: a trial becomes a plain ``TrainConfig``; the training loop's
``report`` callback becomes ``trial.report`` + pruning; results become user attributes.

A trial that fails (out of memory at micro-batch 1, meta tensors, bad data) raises; the
worker records its reason and Optuna marks it FAIL, and ``study.optimize(catch=...)``
keeps the worker alive.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import optuna

from hpo.attributes import (
    BEST_EPOCH_ATTR,
    CHECKPOINT_ARTIFACT_ATTR,
    CHECKPOINT_ATTR,
    CHECKPOINT_SEAL_ATTR,
    EPOCHS_RUN_ATTR,
    INTERVAL_ATTR,
    METRICS_ARTIFACT_ATTR,
    MICRO_BATCH_SIZE_ATTR,
    PEAK_MEMORY_ATTR,
    PROGRESS_ATTR,
    RUN_ID_ATTR,
    SEED_ATTR,
    SETUP_SECONDS_ATTR,
    STOPPED_BY_ATTR,
    THRESHOLDS_ATTR,
    TOKEN_COVERAGE_ATTR,
    TOKENS_TRAINED_ATTR,
    TRAIN_SAMPLES_PER_SECOND_ATTR,
    TRAINING_DIGEST_ATTR,
    WALL_SECONDS_ATTR,
)
from hpo.errors import UsageError
from hpo.models.classifier_file import read_checked
from hpo.outputs import TrialOutputs
from hpo.run.trial_line import progress_words
from hpo.spec import StudySpec
from hpo.study.records import (
    artifact_store,
    completed_trials,
    metric_attrs,
    set_user_attrs,
    study_uid,
    upload,
    write_trial_note,
)
from hpo.study.search import is_unprunable, promote, rung_schedule, start_fidelity, suggest
from hpo.tracking import Tracker, TrialRun
from hpo.train.loop import Looks, TrainResult, train

log = logging.getLogger(__name__)


class Objective:
    def __init__(
        self,
        spec: StudySpec,
        uid: str | None = None,
        worker: str = "",
        deadline: float | None = None,
    ):
        """``uid``: the study's (``study_uid``), which names its folder; None reads it from
        the first trial's study. ``worker`` names this process in the MLflow runs' tags.
        ``deadline`` (epoch seconds): a trial still running then ends at its epoch's end, kept."""
        self.spec, self.deadline = spec, deadline
        self.outputs = self._outputs(uid) if uid else None
        self.artifact_store = artifact_store(spec.output_dir)
        self.tracker = Tracker(spec.tracking.mlflow, spec.name, worker)

    def _outputs(self, uid: str | None) -> TrialOutputs:
        if not uid:
            raise UsageError(
                f"study {self.spec.name!r} has no uid to name its folder; open it with open_study"
            )
        return TrialOutputs(
            self.spec.output_dir,
            self.spec.name,
            uid,
            keep_top_k=self.spec.keep_top_k,
            direction=self.spec.direction,
        )

    def __call__(self, trial: optuna.Trial) -> float:
        if self.outputs is None:
            self.outputs = self._outputs(study_uid(trial.study))
        params = suggest(trial, self.spec)
        with self.tracker.trial_run(
            trial.number, {**params, **_prefixed("train.", self.spec.train)}
        ) as run:
            if (
                self.spec.tracking.mlflow
            ):  # None too: a re-queued copy inherits its original's attributes
                trial.set_user_attr(RUN_ID_ATTR, run.run_id)
            return self._run(trial, params, run)

    def _run(self, trial: optuna.Trial, params: dict[str, object], run: TrialRun) -> float:
        started = time.perf_counter()
        share = start_fidelity(trial, self.spec)  # 1.0: a full run
        config = self.spec.train_config(
            params,
            # a low-fidelity run's model is no candidate for finalize: none is kept
            checkpoint_dir=str(self.outputs.checkpoint_dir(trial.number))
            if self.spec.keep_top_k and share == 1
            else None,
        )
        if share < 1:
            config = dataclasses.replace(config, train_share=share)
        # A low-fidelity run's intermediate values would be set beside full runs' at the same
        # step: not reported. It, a check's full run and a promoted one are never pruned.
        low, unprunable = share < 1, is_unprunable(trial)
        # at the start: a pruned or failed trial reruns from it too; and what it trains, so
        # that finalize can tell whether its kept checkpoint is the retraining it would run
        trial.set_user_attr(SEED_ATTR, config.seed)
        trial.set_user_attr(TRAINING_DIGEST_ATTR, config.training_digest())
        units = self.spec.pruner.units_per_epoch
        looks = Looks(units, rung_schedule(self.spec))
        last_step = config.epochs * units
        epochs_done = [0]

        judged_by = self.spec.prune_on or self.spec.metric

        def report(step: int, value: float, metrics: dict[str, float]) -> bool:
            """``step``: training progress in 1/units of an epoch (the epoch when units is 1)."""
            epoch_end = step % units == 0
            if epoch_end:
                epochs_done[0] = step // units
            run.log_epoch(f"val_{self.spec.metric}", value, step)
            # the intermediate values pruning reads
            signal = metrics[judged_by] if self.spec.prune_on else value
            if not low:
                trial.report(signal, step=step)
            # Asked at the last report too, so a rung pruner records the value among the rung's
            # rivals, but never obeyed there: the trial has already paid for all its epochs.
            if not unprunable and trial.should_prune() and step < last_step:
                raise optuna.TrialPruned(
                    f"pruned after {progress_words(step, units)} at {judged_by}={signal:.4f}"
                )
            limit = self.spec.timeout_per_trial
            if limit and time.perf_counter() - started > limit:  # checked at each report
                raise TimeoutError(
                    f"trial ran past timeout_per_trial={limit}s after {progress_words(step, units)}"
                )
            # only a trial with epochs still to run is stopped (and said to be): one past the
            # deadline at its last epoch's end ran its whole schedule
            spent = self.deadline is not None and time.time() >= self.deadline
            if epoch_end and step < last_step and spent:
                trial.set_user_attr(
                    STOPPED_BY_ATTR, f"the study's time budget, after epoch {step // units}"
                )
                return True  # the loop stops here and the trial is kept with its best epoch
            return False

        def progress(
            state: dict,
        ) -> None:  # for hpo status; best effort: a database blip must not end the trial
            try:
                # "at": hpo status counts the ETA down from when the trial said it
                trial.set_user_attr(PROGRESS_ATTR, {**state, "at": round(time.time(), 1)})
            except Exception as exc:
                log.warning(
                    "trial %d: could not record its progress (%s)", trial.number, type(exc).__name__
                )

        logs: list[Path] = []  # the trial's train.log, once it exists
        try:
            with self.outputs.trial_log(trial.number) as log_file:
                logs.append(log_file)
                result = train(config, report=report, progress=progress, looks=looks)
            value = result.value
            self._record(trial, result)
            run.log_final(
                {
                    **result.metrics,
                    BEST_EPOCH_ATTR: result.best_epoch,
                    EPOCHS_RUN_ATTR: result.epochs_run,
                    WALL_SECONDS_ATTR: result.wall_seconds,
                }
            )
            self._keep_outputs(trial, value, result)
            self._attach_log(trial, logs)
            write_trial_note(trial, self.spec.metric, value)
            for number in promote(trial, self.spec, value):
                log.info("trial %d: screened among the best; queued as a full run", number)
        except optuna.TrialPruned as pruned:
            run.end("PRUNED")
            set_user_attrs(
                trial,
                {
                    EPOCHS_RUN_ATTR: epochs_done[0],
                    WALL_SECONDS_ATTR: round(time.perf_counter() - started, 3),
                },
            )
            self._attach_log(trial, logs)
            write_trial_note(trial, self.spec.metric, None, str(pruned))
            raise
        except Exception:
            # A save cut short (a full disk) leaves no partial checkpoint to keep the disk full.
            self.outputs.remove_checkpoint(trial.number)
            self._attach_log(trial, logs)  # what a failed trial printed is what explains it
            raise
        return value

    def _record(self, trial: optuna.Trial, result: TrainResult) -> None:
        attrs = {
            **metric_attrs(result.metrics),  # one attribute each: a column of the dashboard
            BEST_EPOCH_ATTR: result.best_epoch,
            EPOCHS_RUN_ATTR: result.epochs_run,
            MICRO_BATCH_SIZE_ATTR: result.micro_batch_size,
            WALL_SECONDS_ATTR: round(result.wall_seconds, 3),
            SETUP_SECONDS_ATTR: round(result.setup_seconds, 3),
            TRAIN_SAMPLES_PER_SECOND_ATTR: round(result.train_samples_per_second, 2),
            PEAK_MEMORY_ATTR: round(result.peak_memory_mb, 1),
            TOKENS_TRAINED_ATTR: result.tokens_trained,
            TOKEN_COVERAGE_ATTR: result.token_coverage,
        }
        if (
            result.thresholds is not None
        ):  # tuned on validation; the decision ones with threshold: tuned
            attrs[THRESHOLDS_ATTR] = {k: round(v, 6) for k, v in result.thresholds.items()}
        if result.interval is not None:  # shown beside the value: hpo best, the tune summary
            attrs[INTERVAL_ATTR] = {
                k: result.interval[k] for k in ("low", "high", "level", "posts")
            }
        set_user_attrs(trial, attrs)

    def _keep_outputs(self, trial: optuna.Trial, value: float, result: TrainResult) -> None:
        """metrics.json for every trial; checkpoints for the top-k only, each with an Optuna
        artifact (the dashboard lists them) naming its folder, not a copy of it; a checkpoint
        that drops out of the top-k is deleted."""
        outputs = self.outputs
        metrics_file = outputs.write_metrics(
            trial.number, {"value": value, **trial.user_attrs, "params": trial.params}
        )
        self._upload(trial, metrics_file, METRICS_ARTIFACT_ATTR)
        if result.checkpoint is None:
            return
        kept = [
            t
            for t in completed_trials(trial.study)
            if CHECKPOINT_ATTR in t.user_attrs and outputs.checkpoint_dir(t.number).exists()
        ]
        keep = outputs.ranked_keep([(t.number, t.value) for t in kept] + [(trial.number, value)])
        for old in kept:
            if old.number not in keep:
                outputs.remove_checkpoint(old.number)
                if artifact_id := old.user_attrs.get(CHECKPOINT_ARTIFACT_ATTR):
                    self.artifact_store.remove(artifact_id)
        if trial.number not in keep:
            outputs.remove_checkpoint(trial.number)
            return
        # its seal's digest too: finalize reuses the folder only while it holds this model
        seal = read_checked(result.checkpoint).integrity.digest
        set_user_attrs(trial, {CHECKPOINT_ATTR: result.checkpoint, CHECKPOINT_SEAL_ATTR: seal})
        self._upload(trial, outputs.describe_checkpoint(trial.number), CHECKPOINT_ARTIFACT_ATTR)

    def _upload(self, trial: optuna.Trial, path: Path, attr: str) -> None:
        trial.set_user_attr(attr, upload(self.artifact_store, trial, path))

    def _attach_log(self, trial: optuna.Trial, logs: list[Path]) -> None:
        """The trial's train.log as an artifact, beside it in the dashboard; best effort: a
        full artifact store must not fail a trial that trained."""
        if not logs or not logs[0].exists():
            return
        try:
            upload(self.artifact_store, trial, logs[0])
        except Exception as exc:
            log.warning(
                "trial %d: could not store its train.log as an artifact (%s)",
                trial.number,
                type(exc).__name__,
            )


def _prefixed(prefix: str, settings: dict[str, object]) -> dict[str, object]:
    return {f"{prefix}{key}": value for key, value in settings.items()}
