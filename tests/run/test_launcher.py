"""The launcher's pure part: each worker's command and environment, decided without starting
a process. The Supervisor that runs them is in tests/run/test_supervisor.py."""

from __future__ import annotations

import os
import sys

import pytest

from hpo.run.launcher import WorkerLaunch, visible_gpus, worker_launches

SECRET_URL = "postgresql://hpo:topsecret@db.example:5432/hpo"


def launches(n_workers: int, **kwargs) -> list[WorkerLaunch]:
    kwargs = {"storage": SECRET_URL, "cpu_count": 8, "base_env": {}, "host": "node", **kwargs}
    return worker_launches("studies/criteria-smoke.yaml", n_workers, **kwargs)


def option(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


# ---- worker_launches: pure ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_workers", "cpu_count", "threads"), [(1, 8, 8), (3, 8, 2), (4, 8, 2), (16, 8, 1), (2, 1, 1)]
)
def test_threads_split_the_cores_evenly_and_never_drop_below_one(n_workers, cpu_count, threads):
    result = launches(n_workers, cpu_count=cpu_count)
    assert len(result) == n_workers
    for launch in result:
        assert option(launch.cmd, "--threads") == str(threads)
        assert launch.env["OMP_NUM_THREADS"] == str(threads)
        assert launch.env["MKL_NUM_THREADS"] == str(threads)


def test_a_thread_count_given_overrides_the_even_split():
    for launch in launches(2, cpu_count=8, threads=1):
        assert option(launch.cmd, "--threads") == "1"
        assert launch.env["OMP_NUM_THREADS"] == "1"


def test_each_worker_has_its_own_name_and_runs_the_worker_command():
    result = launches(3)
    assert [launch.name for launch in result] == ["node/0", "node/1", "node/2"]
    for launch in result:
        assert launch.cmd[:5] == [
            sys.executable,
            "-m",
            "hpo",
            "worker",
            "studies/criteria-smoke.yaml",
        ]
        assert option(launch.cmd, "--name") == launch.name
        assert "--await-go" in launch.cmd, (
            "workers load their libraries while the launcher checks, then wait"
        )


def test_gpus_are_handed_out_round_robin():
    result = launches(3, gpu_ids=["0", "1"])
    assert [launch.env["CUDA_VISIBLE_DEVICES"] for launch in result] == ["0", "1", "0"]


def test_no_gpus_means_no_cuda_visible_devices():
    assert all("CUDA_VISIBLE_DEVICES" not in launch.env for launch in launches(2))


def test_overrides_are_forwarded_in_order():
    result = launches(2, overrides=["n_trials=20", "train.epochs=2", "n_trials=30"])
    for launch in result:
        tail = launch.cmd[launch.cmd.index("--set") :]
        assert tail == ["--set", "n_trials=20", "--set", "train.epochs=2", "--set", "n_trials=30"]


def test_storage_url_travels_in_the_environment_never_on_the_command_line():
    for launch in launches(3, overrides=["n_trials=5"]):
        assert launch.env["HPO_STORAGE"] == SECRET_URL
        assert not any("topsecret" in part or "postgresql" in part for part in launch.cmd)


def test_base_env_is_kept_and_not_mutated():
    base = {"PATH": "/usr/bin", "HF_HOME": "/cache/hf", "OMP_NUM_THREADS": "64"}
    before = dict(base)
    result = launches(2, base_env=base, cpu_count=4)
    assert base == before
    for launch in result:
        assert launch.env["PATH"] == "/usr/bin"
        assert launch.env["HF_HOME"] == "/cache/hf"
        assert launch.env["OMP_NUM_THREADS"] == "2"  # ours wins over the inherited value
        assert launch.env is not base
    assert result[0].env is not result[1].env


def test_without_base_env_the_current_environment_is_inherited(monkeypatch):
    monkeypatch.setenv("HPO_LAUNCHER_TEST_MARKER", "inherited")
    before = dict(os.environ)
    result = worker_launches("s.yaml", 1, storage="sqlite:///x.db", cpu_count=2)
    assert result[0].env["HPO_LAUNCHER_TEST_MARKER"] == "inherited"
    assert dict(os.environ) == before


def test_workers_are_told_the_launchers_pid_so_they_can_stop_when_it_dies():
    for launch in launches(2, parent_pid=4321):
        assert option(launch.cmd, "--parent-pid") == "4321"
    assert all(option(launch.cmd, "--parent-pid") == str(os.getpid()) for launch in launches(2))


@pytest.mark.parametrize("n_workers", [0, -2])
def test_fewer_than_one_worker_is_an_error(n_workers):
    with pytest.raises(ValueError, match="n_workers"):
        launches(n_workers)


# ---- visible_gpus --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listed", "gpus"),
    [("0,2", ["0", "2"]), (" 1 , 3 ", ["1", "3"]), ("", []), ("-1", []), ("3", ["3"])],
)
def test_visible_gpus_honours_cuda_visible_devices(monkeypatch, listed, gpus):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert visible_gpus() == gpus
