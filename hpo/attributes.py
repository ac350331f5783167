"""Every key hpo writes into a study's or a trial's attributes in the storage, each spelled once.

The values live on in users' databases, so they never change: a renamed key would hide every
study recorded before it. Half carry the ``hpo:`` namespace (the system attributes hpo keeps
beside Optuna's own) and half do not (the user attributes the dashboard shows as columns); that
is history, kept as it is.

A ground floor like ``hpo.vocabulary``: it imports nothing from hpo and no library, so the
objective that writes a key and the report, status and finalize that read it all take it from
here, whichever layer they sit in.
"""

from __future__ import annotations

# --- study user attributes ---------------------------------------------------------------
TASK_ATTR = "task"  # the spec's task, for hpo status and the report
METRIC_ATTR = "metric"  # the metric the study is judged by
N_TRIALS_ATTR = "n_trials"  # the spec's trial budget
SPEC_FILE_ATTR = "spec_file"  # the file the study was opened from
FINGERPRINT_ATTR = "spec_fingerprint"  # what makes two specs' trials comparable
UID_ATTR = "uid"  # a random id per study: two studies that share a name never share trial folders
DEADLINE_ATTR = "deadline"  # epoch seconds when the study's time budget ends
PLAN_ATTR = "search_strategy"  # the auto sampler's plan: portfolio, then GP, then TPE
FINAL_ATTR = "final"  # finalize's summary
FIDELITY_CHECK_ATTR = "fidelity_check"  # the low fidelity's rank check and what it decided
FINAL_SEED_SPREAD_ATTR = "final_seed_spread"  # its one-line companions, shown in the study note
FINAL_TEST_ATTR = "final_test"

# --- study system attributes -------------------------------------------------------------
SPEC_ATTR = "hpo:spec"  # the spec as a JSON document, less its storage
# per worker name, how many times one opened the study: a restarted worker's sampler seed moves on
WORKER_STARTS_ATTR = "hpo:worker_starts"

# --- trial user attributes ---------------------------------------------------------------
# what the trial trained and who ran it
SEED_ATTR = "seed"
TRAINING_DIGEST_ATTR = "training_digest"  # finalize reuses a checkpoint only for the same digest
WORKER_ATTR = "worker"
PORTFOLIO_ATTR = "portfolio"  # which portfolio move the trial is
# a trial no rung judges, and why: a portfolio move to another kind of model (its curve rises later)
RUNS_TO_END_ATTR = "runs_to_end"
# a low-fidelity run: the share of the training posts it trained on (absent: a full run)
TRAIN_SHARE_ATTR = "train_share"
CHECKED_ATTR = "fidelity_checked"  # a full run whose configuration also runs at low fidelity
TWIN_OF_ATTR = "fidelity_twin_of"  # that low run: the full trial it checks
PROMOTED_FROM_ATTR = "promoted_from"  # a full run of a screened configuration: its low run
RUN_ID_ATTR = "mlflow_run_id"  # its MLflow run, when tracking is on
PROGRESS_ATTR = "progress"  # where a running trial is, for hpo status
# how it ended
FAIL_REASON_ATTR = "fail_reason"
STOPPED_BY_ATTR = "stopped_by"  # a trial the study's time budget stopped, kept with its best epoch
BEST_EPOCH_ATTR = "best_epoch"
EPOCHS_RUN_ATTR = "epochs_run"
# what it cost
WALL_SECONDS_ATTR = "wall_seconds"
SETUP_SECONDS_ATTR = "setup_seconds"
TRAIN_SAMPLES_PER_SECOND_ATTR = "train_samples_per_second"
PEAK_MEMORY_ATTR = "peak_memory_mb"
MICRO_BATCH_SIZE_ATTR = "micro_batch_size"
TOKENS_TRAINED_ATTR = "tokens_trained"
TOKEN_COVERAGE_ATTR = "token_coverage"
# what it scored: one attribute per validation metric (a dashboard column each), the interval
# around the value, the thresholds tuned on validation
METRIC_PREFIX = "metric:"
INTERVAL_ATTR = "validation_interval"
THRESHOLDS_ATTR = "validation_thresholds"
OLD_METRICS_ATTR = "metrics"  # earlier versions' one dict of every metric: left out of exports
# what it kept
CHECKPOINT_ATTR = "checkpoint"  # the kept checkpoint's folder
# its seal's digest as saved: finalize reuses the folder only while it still holds that model
CHECKPOINT_SEAL_ATTR = "checkpoint_seal"
CHECKPOINT_ARTIFACT_ATTR = "checkpoint_artifact"  # the artifact naming that folder
METRICS_ARTIFACT_ATTR = "metrics_artifact"  # metrics.json as an artifact

# --- trial system attributes -------------------------------------------------------------
HEARTBEAT_ATTR = "hpo:heartbeat"  # the last beat, its grace period and retries
SAMPLED_BY_ATTR = "hpo:sampled_by"  # which sampler of the auto plan proposed the trial
# Optuna's own (RetryFailedTrialCallback): the numbers of the trials a retry copies
RETRY_HISTORY_ATTR = "retry_history"
