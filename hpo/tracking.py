"""Every trial as an MLflow run (``tracking: {mlflow: URI}`` in a spec), through MLflow's
own client: parameters, the objective metric per epoch, final metrics, and tags naming
the study, trial and worker. The experiment is named after the study.

Tracking is a courtesy, never a reason to lose a trial: the first MLflow error is logged
as one warning line and tracking is off for the rest of the process. mlflow is imported
only when a spec asks for it (the optional ``tracking`` extra).

Each run's id is recorded on its trial as the user attribute ``mlflow_run_id``; ``hpo
finalize`` logs its model, card and test metrics as one more run, named ``final``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from hpo.storage_url import redact

log = logging.getLogger(__name__)

# MLflow's HTTP client retries 7 times with doubling back-off (minutes, a warning line each)
# before it gives up on a server that is down; a trial should not wait that long for a
# courtesy. The first failure turns tracking off anyway. The user's environment wins.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
REASON_CHARS = 200  # of MLflow's error in the warning: its messages quote whole URLs and tracebacks
STATUS = {"COMPLETE": "FINISHED", "PRUNED": "FINISHED", "FAIL": "FAILED", "INTERRUPTED": "KILLED"}


class Tracker:
    """One per worker process. With ``uri`` None every call does nothing."""

    def __init__(
        self,
        uri: str | None,
        experiment: str,
        worker: str = "",
        tags: Mapping[str, str] | None = None,
    ):
        self.uri, self.experiment, self.worker = uri, experiment, worker
        self.tags = dict(tags or {})
        self._client = None
        self._experiment_id: str | None = None

    @property
    def enabled(self) -> bool:
        return self.uri is not None

    def prepare(self) -> None:
        """Create the experiment (and a database backend's tables) now: ``hpo tune`` calls
        this before its workers start, so they never race to create them."""
        self._guarded(self._experiment)

    @contextmanager
    def trial_run(self, number: int, params: Mapping[str, object]) -> Iterator[TrialRun]:
        """An MLflow run for trial ``number`` for the duration of the block. The run ends
        with the state the block gave it (``TrialRun.end``), else FAIL on an exception,
        INTERRUPTED on Ctrl-C or SIGTERM."""
        run = TrialRun(self, self._guarded(self._start, number, params))
        try:
            yield run
        except KeyboardInterrupt:
            run.end("INTERRUPTED")
            raise
        except BaseException:
            run.end("FAIL")
            raise
        run.end("COMPLETE")

    def log_final_model(
        self,
        params: Mapping[str, object],
        test_metrics: Mapping[str, float],
        files: Mapping[str, Path],
    ) -> str | None:
        """finalize's outcome as the run ``final``: the chosen parameters, the test metrics
        (``test_*``) and ``files`` (artifact path -> file or folder); returns its run id."""
        return self._guarded(self._log_final_model, params, test_metrics, files)

    def _log_final_model(self, params, test_metrics, files) -> str:
        import time

        from mlflow.entities import Metric, Param

        client = self._client_now()
        tags = {**self.tags, "hpo.study": self.experiment, "hpo.final": "true"}
        run_id = client.create_run(self._experiment(), run_name="final", tags=tags).info.run_id
        now = int(time.time() * 1000)
        client.log_batch(
            run_id,
            params=[Param(k, str(v)) for k, v in params.items()],
            metrics=[Metric(f"test_{k}", float(v), now, 0) for k, v in test_metrics.items()],
        )
        for name, path in files.items():
            if path.is_dir():
                client.log_artifacts(run_id, str(path), artifact_path=name)
            else:
                client.log_artifact(run_id, str(path))
        client.set_terminated(run_id, status="FINISHED")
        return run_id

    def _client_now(self):
        if self._client is None:
            for key, value in HTTP_DEFAULTS.items():
                os.environ.setdefault(key, value)
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    def _experiment(self) -> str:
        if self._experiment_id is None:
            client = self._client_now()
            found = client.get_experiment_by_name(self.experiment)
            if found is None:
                try:
                    self._experiment_id = client.create_experiment(self.experiment)
                except Exception:  # another worker created it meanwhile
                    found = client.get_experiment_by_name(self.experiment)
                    if found is None:
                        raise
            self._experiment_id = self._experiment_id or found.experiment_id
        return self._experiment_id

    def _start(self, number: int, params: Mapping[str, object]) -> str:
        from mlflow.entities import Param

        client = self._client_now()
        tags = {
            **self.tags,
            "hpo.study": self.experiment,
            "hpo.trial": str(number),
            "hpo.worker": self.worker,
        }
        run = client.create_run(self._experiment(), run_name=f"trial-{number}", tags=tags)
        client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()])
        return run.info.run_id

    def _guarded(self, call, *args):
        """``call(*args)``, or None once tracking is off; the first error turns it off, in one
        line."""
        if self.uri is None:
            return None
        try:
            return call(*args)
        except Exception as exc:
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if len(first_line) > REASON_CHARS:
                first_line = first_line[:REASON_CHARS] + "…"
            who = f"worker {self.worker}" if self.worker else "this process"
            log.warning(
                "MLflow tracking at %s failed (%s: %s); tracking is off for %s, trials go on",
                redact(self.uri),
                type(exc).__name__,
                redact(self.uri, first_line),
                who,
            )
            self.uri = None
            return None


class TrialRun:
    """One trial's run; every method does nothing once tracking is off."""

    def __init__(self, tracker: Tracker, run_id: str | None):
        self.tracker, self.run_id = tracker, run_id
        self._ended = False

    def log_epoch(self, name: str, value: float, epoch: int) -> None:
        if self.run_id:
            self.tracker._guarded(
                lambda: self.tracker._client_now().log_metric(self.run_id, name, value, step=epoch)
            )

    def log_final(self, metrics: Mapping[str, float]) -> None:
        if self.run_id:
            self.tracker._guarded(self._log_final, metrics)

    def _log_final(self, metrics: Mapping[str, float]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.tracker._client_now().log_batch(
            self.run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()]
        )

    def end(self, state: str) -> None:
        """Tag the trial's state (COMPLETE, PRUNED, FAIL, INTERRUPTED) and end the run; the first
        call wins."""
        if self._ended or not self.run_id:
            return
        self._ended = True

        def finish() -> None:
            client = self.tracker._client_now()
            client.set_tag(self.run_id, "hpo.state", state)
            client.set_terminated(self.run_id, status=STATUS[state])

        self.tracker._guarded(finish)
