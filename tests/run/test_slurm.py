"""Workers as a Slurm job array: the script and the sbatch call (pure), then `hpo submit`
on a real one-node Slurm cluster (munged, slurmctld, slurmd started here) against a real
PostgreSQL study."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hpo.cli import main
from hpo.errors import UsageError
from hpo.run.slurm import ArrayJob, job_script, sbatch_command, submit_script
from hpo.spec import set_flags
from tests.support import REPO
from tests.support.helpers import free_port, unavailable
from tests.support.shared_storage import read_trials, wait_for
from tests.support.tune_cli import study_sets, tune_assets

SECRET_URL = "postgresql://hpo:topsecret@db.example:5432/hpo"
FINISHED = ("COMPLETE", "PRUNED")
SLURM_BINARIES = (
    "munged",
    "munge",
    "slurmctld",
    "slurmd",
    "sbatch",
    "squeue",
    "scancel",
    "sinfo",
    "scontrol",
)
# The example shipped in deploy/slurm/: what `hpo submit` writes for a GPU cluster.
EXAMPLE = ArrayJob(
    spec_path="/shared/hpo/studies/criteria-supermax.yaml",
    study="criteria-supermax",
    workers=8,
    cpus_per_worker=8,
    gpus_per_worker=1,
    partition="gpu",
    time="24:00:00",
    log_dir="/shared/hpo/_runs/studies/slurm",
    workdir="/shared/hpo",
    python="/shared/hpo/.venv/bin/python",
)


def job(**changes) -> ArrayJob:
    fields = {
        "spec_path": "/w/studies/s.yaml",
        "study": "s",
        "workers": 3,
        "cpus_per_worker": 4,
        "log_dir": "/w/_runs/studies/slurm",
        "workdir": "/w",
        "python": "/w/.venv/bin/python",
        **changes,
    }
    return ArrayJob(**fields)


def directives(script: str) -> list[str]:
    return [
        line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")
    ]


def worker_argv(script: str) -> list[str]:
    """The exec line as the shell would split it (the $(…) and ${…} left unexpanded)."""
    line = next(line for line in script.splitlines() if line.startswith("exec "))
    return shlex.split(line.removeprefix("exec "))


# ---- job_script and sbatch_command: pure ------------------------------------------------------


def test_one_array_task_per_worker_with_its_cores_a_stop_signal_and_its_own_log():
    said = directives(job_script(job()))
    assert said == [
        "--job-name=hpo-s",
        "--array=0-2",
        "--ntasks=1",
        "--cpus-per-task=4",
        "--signal=B:TERM@60",
        "--export=ALL",
        "--chdir=/w",
        "--output=/w/_runs/studies/slurm/s-%A_%a.log",
    ]


def test_gpus_partition_and_time_limit_only_when_asked():
    said = directives(job_script(job(gpus_per_worker=2, partition="gpu", time="12:00:00")))
    assert {"--gres=gpu:2", "--partition=gpu", "--time=12:00:00"} <= set(said)


def test_each_task_execs_one_worker_named_after_its_array_task_with_slurms_cores_as_threads():
    script = job_script(job(overrides=("n_trials=40", "train.epochs=2")))
    assert worker_argv(script) == [
        "/w/.venv/bin/python",
        "-m",
        "hpo",
        "worker",
        "/w/studies/s.yaml",
        "--name",
        "$(hostname -s)/${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}",
        "--threads",
        "$threads",
        "--set",
        "n_trials=40",
        "--set",
        "train.epochs=2",
    ]
    assert 'threads="${SLURM_CPUS_PER_TASK:-1}"' in script
    assert 'export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"' in script


def test_overrides_with_spaces_and_quotes_reach_the_worker_intact(tmp_path):
    tricky = ("name=it's a test", 'data_dir=/data/a "b"', "train.epochs=$(reboot)")
    script = job_script(job(overrides=tricky, python="echo"))
    line = next(line for line in script.splitlines() if line.startswith("exec "))
    # Run the exec line with echo for python: what the worker would receive, one argument a line.
    said = subprocess.run(
        ["bash", "-c", 'threads=1; printf "%s\\n" ' + line.removeprefix("exec echo ")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert [said[i + 1] for i, part in enumerate(said) if part == "--set"] == list(tricky)


def test_the_storage_url_is_never_written_into_the_script_it_travels_in_the_environment():
    script = job_script(job(overrides=(f"storage={SECRET_URL}", "n_trials=5")))
    assert "topsecret" not in script and "postgresql://hpo" not in script
    assert worker_argv(script)[-2:] == ["--set", "n_trials=5"]  # the other overrides stay
    base = {"PATH": "/usr/bin", "SBATCH_EXPORT": "NONE"}
    cmd, env = sbatch_command("/w/s.sbatch", SECRET_URL, base_env=base)
    assert cmd == [
        "sbatch",
        "--parsable",
        "--export=ALL",
        "/w/s.sbatch",
    ]  # beats SBATCH_EXPORT=NONE
    assert env["HPO_STORAGE"] == SECRET_URL and env["PATH"] == "/usr/bin"
    assert base == {"PATH": "/usr/bin", "SBATCH_EXPORT": "NONE"}, (
        "the caller's environment is not changed"
    )


def test_a_task_started_without_hpo_storage_stops_at_once_instead_of_using_a_local_sqlite(tmp_path):
    script = tmp_path / "job.sbatch"
    script.write_text(job_script(job(python="true")))
    env = {k: v for k, v in os.environ.items() if k != "HPO_STORAGE"}
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env)
    assert run.returncode != 0 and "set HPO_STORAGE to the study database URL" in run.stderr


def test_paths_with_spaces_are_refused_naming_the_fix():
    with pytest.raises(UsageError, match="without spaces"):
        job_script(job(log_dir="/my runs/slurm"))


def test_the_shipped_example_is_what_submit_writes():
    shipped = (REPO / "deploy" / "slurm" / "hpo-workers.sbatch").read_text()
    assert shipped == job_script(EXAMPLE), (
        "regenerate deploy/slurm/hpo-workers.sbatch from tests.test_slurm.EXAMPLE"
    )


def test_no_sbatch_on_the_path_is_one_line_naming_where_to_run(tmp_path):
    cmd, env = sbatch_command(tmp_path / "s.sbatch", SECRET_URL, base_env={"PATH": str(tmp_path)})
    with pytest.raises(
        UsageError, match="sbatch not found: run `hpo submit --slurm` on a machine with Slurm"
    ):
        submit_script(cmd, env, SECRET_URL)


def test_sqlite_storage_is_refused_for_slurm_in_one_line(tmp_path, capsys):
    code = main(
        [
            "submit",
            str(REPO / "studies" / "criteria-smoke.yaml"),
            "--slurm",
            "--workers",
            "2",
            "--storage",
            f"sqlite:///{tmp_path / 'hpo.db'}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert (
        "is SQLite, which workers on several nodes cannot share; pass --storage postgresql://"
        in err
    )
    assert not (tmp_path / "hpo.db").exists(), "refused before anything was created"


def test_submit_without_a_scheduler_flag_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["submit", "studies/criteria-smoke.yaml", "--workers", "2"])
    assert stopped.value.code == 2 and "--slurm" in capsys.readouterr().err


# ---- a real one-node Slurm cluster --------------------------------------------------------------


def _slurm_conf(root: Path, socket_path: Path) -> str:
    host = socket.gethostname().split(".")[0]
    return "\n".join(
        [
            "ClusterName=hpotest",
            f"SlurmctldHost={host}",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",  # beside any Slurm already on the machine
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={socket_path}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",  # no cgroups in a container
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={root / 'spool'}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / 'slurmd.pid'}",
            f"SlurmctldLogFile={root / 'slurmctld.log'}",
            f"SlurmdLogFile={root / 'slurmd.log'}",
            "ReturnToService=2",
            "MinJobAge=600",
            "KillWait=10",  # finished tasks stay visible to scontrol while the test reads them
            f"NodeName={host} CPUs={os.cpu_count()} RealMemory=1000 State=UNKNOWN",
            f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@pytest.fixture(scope="session")
def slurm():
    """A one-node Slurm cluster in a temporary directory; yields the environment its
    clients (sbatch, squeue, scancel) need. Skipped where Slurm is not installed, except
    in CI, which installs it (.ci/run) and so fails instead."""
    missing = [
        name
        for name in SLURM_BINARIES
        if not shutil.which(name, path=os.environ["PATH"] + ":/usr/sbin")
    ]
    problem = (
        f"Slurm is not installed (missing {', '.join(missing)}): "
        "apt-get install slurmctld slurmd slurm-client munge"
        if missing
        else None
        if os.geteuid() == 0
        else "a test Slurm cluster runs its daemons as root"
    )
    if problem:
        unavailable(problem)
    # Not under pytest's tmp dir: munged runs as the munge user and must reach its key.
    root = Path(tempfile.mkdtemp(prefix="hpo-slurm-"))
    root.chmod(0o755)
    daemons: list[subprocess.Popen] = []
    try:
        munge_dir = root / "munge"
        munge_dir.mkdir(mode=0o700)
        key = munge_dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        for path in (munge_dir, key):
            shutil.chown(path, "munge", "munge")  # munged refuses a key it does not own
        for name in ("state", "spool"):
            (root / name).mkdir()
        socket_path = munge_dir / "munge.socket"
        daemons.append(
            subprocess.Popen(
                [
                    shutil.which("munged", path="/usr/sbin:/usr/bin"),
                    "--foreground",
                    "--force",
                    f"--socket={socket_path}",
                    f"--key-file={key}",
                    f"--log-file={munge_dir / 'munged.log'}",
                    f"--pid-file={munge_dir / 'munged.pid'}",
                    f"--seed-file={munge_dir / 'munged.seed'}",
                ],
                user="munge",
                group="munge",
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
        )
        wait_for(lambda: socket_path.exists(), 20, "munged's socket")
        conf = root / "slurm.conf"
        conf.write_text(_slurm_conf(root, socket_path))
        env = dict(os.environ, SLURM_CONF=str(conf))
        for daemon in ("slurmctld", "slurmd"):
            daemons.append(
                subprocess.Popen(
                    [shutil.which(daemon, path="/usr/sbin:/usr/bin"), "-D", "-f", str(conf)],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.STDOUT,
                )
            )

        def node_idle() -> bool:
            for daemon in daemons:
                if daemon.poll() is not None:
                    logs = "".join(p.read_text()[-2000:] for p in root.glob("*.log"))
                    raise AssertionError(f"{daemon.args[0]} exited {daemon.returncode}: {logs}")
            state = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True
            )
            return state.stdout.strip() == "idle"

        wait_for(node_idle, 60, "the Slurm node to come up idle")
        yield env
    finally:
        if (
            len(daemons) == 3
        ):  # a failed test's tasks must not outlive the cluster (slurmstepd stays up)
            subprocess.run(["scancel", "--user", str(os.geteuid())], env=env, timeout=30)
            wait_for(
                lambda: (
                    not subprocess.run(
                        ["squeue", "-h"], env=env, capture_output=True, text=True
                    ).stdout.strip()
                ),
                40,
                "the test jobs to end",
            )
        for daemon in reversed(daemons):  # ours only, by PID: slurmd, slurmctld, munged
            daemon.terminate()
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta):
    return tune_assets(tmp_path_factory.mktemp("slurm"), tiny_roberta, tiny_deberta)


def _submit(name: str, storage: str, assets, env, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "hpo",
        "submit",
        str(REPO / "studies" / "criteria-smoke.yaml"),
        "--slurm",
        "--workers",
        "2",
        "--cpus-per-worker",
        "1",
        "--storage",
        storage,
        *set_flags(study_sets(name, assets)),
        *extra,
    ]
    return subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=120, cwd=assets["root"]
    )


def _in_queue(job_id: str, env) -> bool:
    return bool(
        subprocess.run(
            ["squeue", "-h", "-j", job_id], env=env, capture_output=True, text=True
        ).stdout.strip()
    )


def _task_record(job_id: str, task: int, env) -> str:
    return subprocess.run(
        ["scontrol", "show", "job", f"{job_id}_{task}"], env=env, capture_output=True, text=True
    ).stdout


@pytest.mark.slow
@pytest.mark.postgres
def test_a_job_array_finishes_the_study_and_a_cancelled_task_hands_its_trial_over(
    slurm, postgres_url, study_name, assets
):
    """`hpo submit --slurm --workers 2`: two array tasks share the study; task 1 is
    scancelled mid-trial, re-queues its trial and exits; task 0 runs that trial and the
    rest, and the study ends at exactly n_trials finished trials with task 0 exiting 0."""
    started = time.monotonic()
    run = _submit(
        study_name,
        postgres_url,
        assets,
        slurm,
        "--set",
        "n_trials=4",
        "--set",
        "train.epochs=2",
        "--set",
        "pruner={name: none}",
        "--set",
        "keep_top_k=0",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    job_id = re.search(r"submitted job array (\d+):", run.stdout).group(1)
    log_dir = assets["root"] / study_name / "slurm"
    script = (log_dir / f"{study_name}.sbatch").read_text()
    try:
        assert "127.0.0.1:5432" not in script, "the storage URL travels in the environment only"

        def task_1_training():  # past its first epoch: every parameter chosen, mid-training
            return [
                t
                for t in read_trials(study_name, postgres_url)
                if t.state.name == "RUNNING"
                and t.user_attrs.get("worker", "").endswith(f"/{job_id}_1")
                and t.intermediate_values
            ]

        interrupted = wait_for(task_1_training, 120, "task 1 to be mid-trial")[0]
        subprocess.run(["scancel", f"{job_id}_1"], env=slurm, check=True)
        wait_for(lambda: not _in_queue(job_id, slurm), 150, "the job array to end")
    finally:
        subprocess.run(["scancel", job_id], env=slurm)
    logs = {task: (log_dir / f"{study_name}-{job_id}_{task}.log").read_text() for task in (0, 1)}
    shown = f"\n--- task 0:\n{logs[0][-3000:]}\n--- task 1:\n{logs[1][-3000:]}"
    trials = {t.number: t for t in read_trials(study_name, postgres_url)}
    finished = [t for t in trials.values() if t.state.name in FINISHED]
    assert len(finished) == 4, shown
    assert not [t for t in trials.values() if t.state.name in ("RUNNING", "WAITING")], shown
    # The cancelled task's trial failed as interrupted; its copy (same parameters) ran to the end on
    # task 0.
    assert trials[interrupted.number].state.name == "FAIL", shown
    assert "interrupted" in trials[interrupted.number].user_attrs["fail_reason"]
    copies = [
        t for t in trials.values() if interrupted.number in t.system_attrs.get("retry_history", [])
    ]
    assert len(copies) == 1 and copies[0].state.name in FINISHED, shown
    assert interrupted.params, shown
    assert copies[0].params == interrupted.params
    assert copies[0].user_attrs["worker"].endswith(f"/{job_id}_0"), shown
    assert f"interrupted; its running trial {interrupted.number} was re-queued" in logs[1], shown
    assert "done after" in logs[0], shown
    assert "JobState=COMPLETED" in _task_record(
        job_id, 0, slurm
    ) and "ExitCode=0:0" in _task_record(job_id, 0, slurm)
    assert "JobState=CANCELLED" in _task_record(job_id, 1, slurm)
    print(f"job array {job_id}: submitted to finished in {time.monotonic() - started:.0f}s")


@pytest.mark.postgres
@pytest.mark.slow
def test_a_job_slurm_refuses_is_one_line_with_slurms_reason(
    slurm, postgres_url, study_name, assets
):
    run = _submit(study_name, postgres_url, assets, slurm, "--partition", "no-such-partition")
    assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]
    line = run.stderr.strip().splitlines()[-1]  # after Optuna's own "A new study created" note
    assert (
        line.startswith("hpo: error: sbatch refused the job: ") and "partition" in line.lower()
    ), line


@pytest.mark.slow
@pytest.mark.postgres
def test_a_job_array_keeps_the_time_budget_and_ends_by_itself(
    slurm, postgres_url, study_name, assets
):
    """`hpo submit --slurm --timeout 45s` on a study of 10,000 trials (a tiny trial takes
    ~0.3 s here, so the budget, not n_trials, must end it): the budget starts when the study is
    opened (as `hpo tune`'s does), the tasks start no trial past it and the array ends by
    itself, long before n_trials, with nothing left running."""
    run = _submit(
        study_name,
        postgres_url,
        assets,
        slurm,
        "--timeout",
        "45s",
        "--set",
        "n_trials=10000",
        "--set",
        "train.epochs=1",
        "--set",
        "pruner={name: none}",
        "--set",
        "keep_top_k=0",
    )
    submitted = time.time()  # the budget started before this, when the study was opened
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "a time budget until" in run.stdout, run.stdout
    job_id = re.search(r"submitted job array (\d+):", run.stdout).group(1)
    try:
        wait_for(lambda: not _in_queue(job_id, slurm), 240, "the job array to end by itself")
    finally:
        subprocess.run(["scancel", job_id], env=slurm)
    log_dir = assets["root"] / study_name / "slurm"
    logs = "".join((log_dir / f"{study_name}-{job_id}_{task}.log").read_text() for task in (0, 1))
    trials = read_trials(study_name, postgres_url)
    assert 0 < len([t for t in trials if t.state.name in FINISHED]) < 10000, logs[-3000:]
    assert not [t for t in trials if t.state.name in ("RUNNING", "WAITING")], logs[-3000:]
    late = [t for t in trials if t.datetime_start.timestamp() > submitted + 45]
    assert not late, f"trials started after the budget: {[t.number for t in late]}"
