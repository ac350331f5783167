"""The child-process contract: what ``hpo tune`` hands a worker and ``hpo finalize`` a
retraining, turned into flags and an environment and read back by the real subcommands."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hpo.cli import build_parser
from hpo.storage_url import StorageUrl
from hpo.train.child import ChildContract

SECRET = "postgresql://hpo:topsecret@db.example:5432/hpo"
CONTRACT = ChildContract(
    threads=1, memory_mb=4096, gpus=("1", "2"), parent_pid=1, storage=StorageUrl.of(SECRET)
)


@pytest.mark.parametrize(
    "program", [["worker", "s.yaml"], ["retrain", "s.yaml", "--runs-dir", "runs"]]
)
def test_each_child_command_reads_back_the_contract_its_parent_wrote(program):
    args = build_parser().parse_args([*program, *CONTRACT.flags()])
    received = ChildContract.from_args(args)
    # the storage and GPUs reach the child in its environment, not its flags
    assert received == ChildContract(threads=1, memory_mb=4096, parent_pid=1)


def test_the_environment_carries_storage_threads_and_gpus_and_leaves_the_base_alone():
    base = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "64"}
    env = CONTRACT.env(base)
    assert base == {"PATH": "/usr/bin", "OMP_NUM_THREADS": "64"}
    assert env["HPO_STORAGE"] == SECRET and env["CUDA_VISIBLE_DEVICES"] == "1,2"
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["PATH"] == "/usr/bin" and env["TOKENIZERS_PARALLELISM"] == "false"
    assert not any("topsecret" in flag for flag in CONTRACT.flags())


def test_an_empty_contract_changes_nothing_it_was_not_given():
    assert ChildContract().flags() == []
    env = ChildContract().env({"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "8"})
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["OMP_NUM_THREADS"] == "8"
    assert "HPO_STORAGE" not in env


@pytest.mark.slow
def test_applied_in_the_child_it_sets_threads_and_the_memory_ceiling():
    probe = (
        "from hpo.train.child import ChildContract\n"
        "ChildContract(threads=1, memory_mb=2048).apply()\n"
        "import torch\n"
        "from hpo.train.memory import memory_ceiling_mb\n"
        "print(torch.get_num_threads(), memory_ceiling_mb())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["1", "2048"]


def test_a_child_started_with_sigint_ignored_is_stopped_by_sigint_while_it_loads():
    """A background job of a script inherits SIGINT ignored; the launcher stops its workers
    with SIGINT, and a worker still loading its libraries ran trials until SIGKILLed 30 s on."""
    import os
    import signal
    import time

    probe = (
        "import os, signal, sys, time\n"
        "from hpo.train.child import ChildContract\n"
        "ChildContract(parent_pid=os.getppid()).apply()\n"
        "print('loaded', flush=True)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", probe],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert child.stdout.readline() == "loaded\n"
        started = time.monotonic()
        os.kill(child.pid, signal.SIGINT)
        assert child.wait(timeout=10) == -signal.SIGINT
        assert time.monotonic() - started < 5
    finally:
        child.kill()
        child.wait()
