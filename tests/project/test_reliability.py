"""Breaking things on purpose against the real PostgreSQL: killed workers, a database
restart, many concurrent workers, out-of-memory and meta tensors inside a worker."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
import torch
from optuna.trial import TrialState
from safetensors.torch import load_file

from hpo.models import classifier as classifier_module
from hpo.models.classifier import EncoderClassifier
from hpo.run import objective as objective_module
from hpo.run.worker import run_worker
from hpo.spec import load_spec
from hpo.train import setup as train_setup  # where a run builds and moves its model
from tests.support import REPO
from tests.support.shared_storage import read_study
from tests.support.tune_cli import study_sets, tune_assets

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta):
    return tune_assets(
        tmp_path_factory.mktemp("reliability"), tiny_roberta, tiny_deberta, posts=60, seed=2
    )


def _overrides(name: str, assets, *extra: str) -> list[str]:
    sets = [
        *study_sets(name, assets),
        "keep_top_k=0",
        "heartbeat.interval=1",
        "heartbeat.grace_period=4",
        # a trial caught running stays so until it is killed or cut off: no rung ends it first
        "pruner={name: none}",
        *extra,
    ]
    return sets


def _start_worker(spec: str, name: str, storage: str, overrides: list[str]) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "hpo",
        "worker",
        str(REPO / "studies" / spec),
        "--name",
        name,
        "--threads",
        "1",
    ]
    for item in overrides:
        cmd += ["--set", item]
    return subprocess.Popen(
        cmd,
        env={**os.environ, "HPO_STORAGE": storage},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _wait_all(procs, timeout: float) -> dict[str, str]:
    outputs = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=timeout)
        outputs[name] = out
    return outputs


def _wait_clean_exit(procs) -> None:
    outputs = _wait_all(procs, timeout=300)
    for name, proc in procs.items():
        assert proc.returncode == 0, outputs[name][-3000:]


def _kill_leftovers(procs) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_killed_workers_lose_no_trial(postgres_url, study_name, assets):
    """kill -9 a worker in the middle of a trial, three times, starting a replacement each
    time: the killed trials are failed by the heartbeat, re-queued with the same
    parameters, and the study ends at exactly n_trials."""
    overrides = _overrides(study_name, assets, "n_trials=10", "train.epochs=2")
    procs = {
        f"w{i}": _start_worker("evidence-smoke.yaml", f"w{i}", postgres_url, overrides)
        for i in range(4)
    }
    killed_trials: list[int] = []
    deadline = time.monotonic() + 240
    try:
        while len(killed_trials) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                running = read_study(study_name, postgres_url).get_trials(
                    states=(TrialState.RUNNING,)
                )
            except KeyError:  # the first worker has not created the study yet
                continue
            victims = [
                t
                for t in running
                if t.user_attrs.get("worker") in procs
                and t.number not in killed_trials
                and procs[t.user_attrs["worker"]].poll() is None
            ]
            if not victims:
                continue
            trial = victims[0]
            name = trial.user_attrs["worker"]
            os.killpg(procs[name].pid, signal.SIGKILL)
            procs[name].wait()
            killed_trials.append(trial.number)
            replacement = f"{name}r"
            procs[replacement] = _start_worker(
                "evidence-smoke.yaml", replacement, postgres_url, overrides
            )
            del procs[name]
        assert len(killed_trials) == 3, "could not catch three workers mid-trial"
        _wait_clean_exit(procs)
    finally:
        _kill_leftovers(procs)
    study = read_study(study_name, postgres_url)
    trials = study.get_trials()
    assert len([t for t in trials if t.state in FINISHED]) == 10
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    by_number = {t.number: t for t in trials}
    for number in killed_trials:
        killed = by_number[number]
        assert killed.state == TrialState.FAIL, "the heartbeat fails a dead worker's trial"
        retries = [t for t in trials if t.system_attrs.get("retry_history", [])[-1:] == [number]]
        # Same parameters: every one the killed trial had chosen (a kill mid-suggest leaves the rest
        # to the retry).
        assert len(retries) == 1 and killed.params.items() <= retries[0].params.items(), (
            "re-queued, same parameters"
        )
        chain = [t for t in trials if number in t.system_attrs.get("retry_history", [])]
        assert any(t.state in FINISHED for t in chain), "the re-queued trial ran to the end"


@pytest.mark.serial  # restarts the server every test shares
def test_database_restart_mid_study_loses_nothing(postgres_url, study_name, assets):
    overrides = _overrides(study_name, assets, "n_trials=6", "train.epochs=2")
    procs = {
        f"w{i}": _start_worker("evidence-smoke.yaml", f"w{i}", postgres_url, overrides)
        for i in range(2)
    }
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                if read_study(study_name, postgres_url).get_trials(states=FINISHED):
                    break
            except KeyError:
                continue
        version = os.listdir("/etc/postgresql")[0]
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
            check=True,
            timeout=60,
        )
        _wait_clean_exit(procs)
    finally:
        _kill_leftovers(procs)
    study = read_study(study_name, postgres_url)
    assert len(study.get_trials(states=FINISHED)) == 6
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))


class _CuttableLink:
    """A TCP relay in front of PostgreSQL that a test can cut (every connection dropped, new
    ones closed at once) and restore: a real network outage for one worker, leaving the
    database itself, and every other user of it, untouched."""

    def __init__(self, target: tuple[str, int]):
        self.target, self.up, self.sockets = target, threading.Event(), []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            if not self.up.is_set():
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.up.clear()
        for end in self.sockets:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
        self.sockets.clear()

    def restore(self) -> None:
        self.up.set()


OUTAGE_WORKER = textwrap.dedent("""
    import sys, time
    from hpo.study.search import suggest
    from hpo.spec import load_spec
    from hpo.run.worker import run_worker
    spec = load_spec(sys.argv[1], sys.argv[3:])
    def objective(trial):  # no training: two seconds of reported steps, for an outage to land in
        params = suggest(trial, spec)
        for step in range(10):
            time.sleep(0.2)
            trial.report(params["learning_rate"], step)
        return params["learning_rate"]
    print("ran", run_worker(spec, worker=sys.argv[2], objective=objective, poll_seconds=0.2))
""")


def test_a_trial_the_database_drops_is_failed_saying_so_and_requeued(
    postgres_url, study_name, assets
):
    """The network to the database drops mid-trial: once it is back, the worker fails that
    trial recording why, says so in its log, queues it again, and finishes the study."""
    db = sa.make_url(postgres_url)
    link = _CuttableLink((db.host, db.port or 5432))
    via_link = db.set(port=link.port).render_as_string(hide_password=False)
    overrides = _overrides(
        study_name, assets, "n_trials=3", "sampler.name=random", "sampler.options={}"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            OUTAGE_WORKER,
            str(REPO / "studies" / "evidence-smoke.yaml"),
            "w",
            *overrides,
        ],
        env={**os.environ, "HPO_STORAGE": via_link},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline, lost = time.monotonic() + 60, None
        while lost is None and time.monotonic() < deadline:
            time.sleep(0.1)
            with contextlib.suppress(KeyError):  # not created yet
                running = read_study(study_name, postgres_url).get_trials(
                    states=(TrialState.RUNNING,)
                )
                lost = next((t for t in running if t.intermediate_values), None)
        assert lost is not None, "no trial got under way"
        link.cut()
        time.sleep(2.5)
        link.restore()
        output, _ = proc.communicate(timeout=120)
    finally:
        _kill_leftovers({"w": proc})
    assert proc.returncode == 0, output[-3000:]
    trials = read_study(study_name, postgres_url).get_trials()
    failed = trials[lost.number]
    assert failed.state == TrialState.FAIL
    assert failed.user_attrs.get("fail_reason", "").startswith(
        "database unreachable during the trial"
    ), failed.user_attrs
    assert f"trial {lost.number} FAIL (database unreachable during the trial" in output, output[
        -3000:
    ]
    retry = [t for t in trials if t.system_attrs.get("failed_trial") == lost.number]
    assert (
        len(retry) == 1
        and retry[0].state == TrialState.COMPLETE
        and retry[0].params == failed.params
    )
    assert len([t for t in trials if t.state in FINISHED]) == 3


FAST_WORKER = textwrap.dedent("""
    import sys
    from hpo.study.search import suggest
    from hpo.spec import load_spec
    from hpo.run.worker import run_worker
    spec = load_spec(sys.argv[1], sys.argv[3:])
    def objective(trial):  # no training: this test is about the storage under concurrency
        params = suggest(trial, spec)
        return params["learning_rate"] * 100 + params["head_dropout"]
    print("ran", run_worker(spec, worker=sys.argv[2], objective=objective, poll_seconds=0.2))
""")


def test_eight_workers_four_hundred_trials_exact_count(postgres_url, study_name, assets):
    overrides = _overrides(
        study_name, assets, "n_trials=400", "sampler.name=random", "sampler.options={}"
    )
    spec = str(REPO / "studies" / "evidence-smoke.yaml")
    procs = {
        f"w{i}": subprocess.Popen(
            [sys.executable, "-c", FAST_WORKER, spec, f"w{i}", *overrides],
            env={**os.environ, "HPO_STORAGE": postgres_url},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(8)
    }
    outputs = _wait_all(procs, timeout=400)
    for name, proc in procs.items():
        assert proc.returncode == 0, outputs[name][-3000:]
        bad = [
            line
            for line in outputs[name].splitlines()
            if any(
                word in line for word in ("already finished", "Error", "Traceback", "SurplusTrial")
            )
        ]
        assert not bad, bad[:5]
    study = read_study(study_name, postgres_url)
    trials = study.get_trials()
    assert len([t for t in trials if t.state in FINISHED]) == 400
    numbers = [t.number for t in trials]
    assert len(numbers) == len(set(numbers)) and sorted(numbers) == list(range(len(numbers)))
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert sum(int(out.split("ran")[-1].split()[0]) for out in outputs.values()) == len(trials)
    assert len({t.user_attrs["worker"] for t in trials}) == 8


def _in_process_spec(name, storage, assets, *extra):
    return load_spec(
        REPO / "studies" / "evidence-smoke.yaml",
        _overrides(name, assets, "train.epochs=1", "keep_top_k=1", *extra),
        storage=storage,
    )


def test_out_of_memory_trial_does_not_kill_the_worker(
    postgres_url, study_name, assets, monkeypatch
):
    """Trial 0 fits at micro-batch 4 and completes; trial 1 cannot fit even one example
    and fails with the reason recorded; the worker goes on to finish the study."""
    real_forward, real_train = EncoderClassifier.forward, objective_module.train
    limits, started = {0: 4, 1: 0}, []

    def train(
        config, report=None, progress=None, **looks
    ):  # the worker runs its trials one after another: call k is trial k
        started.append(config)
        return real_train(config, report, progress, **looks)

    def forward(module, input_ids, **kwargs):
        if input_ids.shape[0] > limits.get(len(started) - 1, 10_000):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_forward(module, input_ids, **kwargs)

    monkeypatch.setattr(objective_module, "train", train)
    monkeypatch.setattr(EncoderClassifier, "forward", forward)
    spec = _in_process_spec(study_name, postgres_url, assets, "n_trials=3", "train.batch_size=16")
    study = optuna.create_study(study_name=study_name, storage=postgres_url, direction="maximize")
    run_worker(spec, worker="oom", poll_seconds=0.2)
    trials = study.get_trials()
    assert trials[0].state == TrialState.COMPLETE and trials[0].user_attrs["micro_batch_size"] == 4
    assert trials[1].state == TrialState.FAIL
    assert "micro-batch 1" in trials[1].user_attrs["fail_reason"]
    assert len([t for t in trials if t.state in FINISHED]) == 3


def test_meta_tensor_trial_fails_by_name_and_worker_carries_on(
    postgres_url, study_name, assets, monkeypatch
):
    """Trial 0 gets an encoder on meta: restored exactly from its checkpoint, it completes.
    Trial 1 gets a meta tensor no checkpoint holds: it fails with a MetaTensorError naming
    it, never trains on re-initialised weights, and the worker finishes the study."""
    real_build = classifier_module.build_classifier
    built = []

    def build(task, encoder_path, head_config=None, encoder_dropout=None, lora=None, **options):
        model = real_build(task, encoder_path, head_config, encoder_dropout, lora, **options)
        number = len(built)
        built.append(model)
        if number == 0:
            model.encoder.embeddings.word_embeddings.weight = torch.nn.Parameter(
                torch.empty_like(model.encoder.embeddings.word_embeddings.weight, device="meta")
            )
        elif number == 1:
            model.register_buffer("stray_scale", torch.empty(3, device="meta"))
        return model

    real_transfer = train_setup.safe_to_device
    restored = []

    def transfer(model, device, checkpoint=None):
        moved = real_transfer(model, device, checkpoint)
        restored.append(model.encoder.embeddings.word_embeddings.weight.detach().clone())
        return moved

    monkeypatch.setattr(train_setup, "build_classifier", build)
    monkeypatch.setattr(train_setup, "safe_to_device", transfer)
    spec = _in_process_spec(
        study_name,
        postgres_url,
        assets,
        "n_trials=3",
        "search_space.encoder.choices=[tiny-roberta]",
    )
    study = optuna.create_study(study_name=study_name, storage=postgres_url, direction="maximize")
    run_worker(spec, worker="meta", poll_seconds=0.2)
    trials = study.get_trials()
    assert trials[0].state == TrialState.COMPLETE
    saved = load_file(Path(assets["roberta"]) / "model.safetensors")
    assert torch.equal(restored[0], saved["embeddings.word_embeddings.weight"]), (
        "restored bit-exact before training"
    )
    assert len(restored) == len(trials) - 1, "trial 1 never got past the transfer"
    assert trials[1].state == TrialState.FAIL
    assert "MetaTensorError" in trials[1].user_attrs["fail_reason"]
    assert "stray_scale" in trials[1].user_attrs["fail_reason"]
    assert len([t for t in trials if t.state in FINISHED]) == 3


def test_surplus_bookkeeping_is_not_logged_as_a_failure():
    from hpo.run.trial_line import TrialLog
    from hpo.study.records import SURPLUS

    trial_log = TrialLog("macro_f1", ["learning_rate"])
    surplus = optuna.trial.create_trial(
        state=TrialState.FAIL, user_attrs={"fail_reason": f"{SURPLUS} 6 trials"}
    )
    failed = optuna.trial.create_trial(
        state=TrialState.FAIL, user_attrs={"fail_reason": "ValueError: x"}
    )
    assert trial_log(surplus) is None and not trial_log.last_failed
    line = trial_log(failed)  # a real failure still shows
    assert line.split("; reason: ")[-1] == "ValueError: x" and trial_log.last_failed
