"""What the machine can run: more workers than cores, or memory ceilings it cannot honour,
refused before any process or study exists."""

from __future__ import annotations

import os
import subprocess
import sys

import optuna
import pytest

from tests.support import REPO


def test_capacity_refuses_more_workers_than_cores_unless_gpus_say_otherwise():
    from hpo.errors import UsageError
    from hpo.run.capacity import check_capacity

    check_capacity(2, cpus=2, memory_mb=None, machine_mb=None)
    check_capacity(8, cpus=2, gpu_groups=8, memory_mb=None, machine_mb=None)  # a GPU each
    with pytest.raises(UsageError, match=r"^--workers 1000: this machine has 2 CPU cores, so it "):
        check_capacity(1000, cpus=2, memory_mb=None, machine_mb=None)
    with pytest.raises(UsageError, match="2 CPU cores and 4 GPU groups.*--workers 4 or fewer"):
        check_capacity(5, cpus=2, gpu_groups=4, memory_mb=None, machine_mb=None)


def test_capacity_refuses_a_memory_ceiling_too_small_for_a_worker_or_past_the_machine():
    from hpo.errors import UsageError
    from hpo.run.capacity import MIN_WORKER_MEMORY_MB, check_capacity

    machine = 24 * 1024
    check_capacity(2, cpus=2, memory_mb=int(machine * 0.45), machine_mb=machine)
    check_capacity(2, cpus=2, memory_mb=MIN_WORKER_MEMORY_MB, machine_mb=machine)
    # 1000 workers on a machine of many cores: the even split is 22 MiB each
    with pytest.raises(UsageError, match=r"ceiling of 22 MiB, under the 1024 MiB.*at most 21 "):
        check_capacity(1000, cpus=1000, memory_mb=22, machine_mb=machine)
    with pytest.raises(UsageError, match="pass --memory-per-worker 1024M or more"):
        check_capacity(1, cpus=2, memory_mb=100, machine_mb=machine, memory_given=True)
    # 5T on 24 GiB: the ceiling would never stop a worker before the kernel does
    with pytest.raises(UsageError, match=r"^--memory-per-worker 5242880M .* at most 12288M"):
        check_capacity(2, cpus=2, memory_mb=5 * 1024**2, machine_mb=machine, memory_given=True)
    check_capacity(2, cpus=2, memory_mb=50, machine_mb=None)  # unknown memory: not judged


WORKER_MARK = """\
import os
if b"\\0worker\\0" in open("/proc/self/cmdline", "rb").read():
    with open(os.environ["HPO_TEST_WORKER_MARKS"], "a") as marks:
        marks.write(f"{os.getpid()}\\n")
"""


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--workers", "1000"), "--workers 1000: this machine has"),
        (("--workers", "1", "--memory-per-worker", "5T"), "--memory-per-worker 5242880M for 1"),
        (("--workers", "1", "--memory-per-worker", "100M"), "ceiling of 100 MiB, under the"),
    ],
)
def test_tune_refuses_what_the_machine_cannot_run_before_any_process_or_study(
    flags, said, tmp_path, postgres_url, study_name
):
    """Issue #34 items 5 and 7, the real CLI: exit 2 and one line, no study in the storage, and
    no worker process ever started (every Python process that starts as `hpo worker` marks a
    file, through a sitecustomize on the PYTHONPATH the launcher hands down)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(WORKER_MARK)
    marks = tmp_path / "workers.txt"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO)]),
        "HPO_TEST_WORKER_MARKS": str(marks),
    }
    env.pop("HPO_STORAGE", None)
    cmd = [sys.executable, "-m", "hpo", "tune", str(REPO / "studies" / "criteria-smoke.yaml")]
    cmd += [*flags, "--storage", postgres_url, "--set", f"name={study_name}", "--no-progress"]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and said in run.stderr, run.stderr
    assert run.stderr.startswith("hpo: error: ") and "Traceback" not in run.stderr
    assert study_name not in {s.study_name for s in optuna.get_all_study_summaries(postgres_url)}
    assert not marks.exists(), f"worker processes started: {marks.read_text()}"
