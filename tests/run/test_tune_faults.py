"""`hpo tune` end to end when something breaks: the database stops, refuses or loses the
study, the launcher is killed or hung up, a worker is killed, the time or memory runs out,
every trial fails the same way."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest

from hpo.spec import set_flags
from tests.support import REPO
from tests.support.shared_storage import (
    delete_until_gone,
    read_study,
    read_trials,
    running_trials,
    wait_for,
)
from tests.support.tune_cli import study_sets, tune_assets

# ---- `hpo tune` end to end on PostgreSQL: a database outage, a killed or hung-up launcher ----
# The real CLI as a subprocess, tiny encoders and sample data, real PostgreSQL.


def e2e(test):
    """Slow, on the real PostgreSQL; Linux only, for /proc."""
    for mark in (
        pytest.mark.slow,
        pytest.mark.postgres,
        pytest.mark.skipif(
            sys.platform != "linux", reason="reads /proc to find the worker processes"
        ),
    ):
        test = mark(test)
    return test


FINISHED = ("COMPLETE", "PRUNED")
ORPHAN_SECONDS = 15  # how long workers may outlive a launcher that was killed


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta):
    return tune_assets(
        tmp_path_factory.mktemp("launcher"), tiny_roberta, tiny_deberta, posts=60, seed=3
    )


def _start_tune(
    name: str, storage: str, assets, *sets: str, flags: tuple[str, ...] = (), **popen
) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "hpo",
        "tune",
        str(REPO / "studies" / "criteria-smoke.yaml"),
        "--workers",
        "2",
        "--storage",
        storage,
        "--no-progress",
        *flags,
    ]
    cmd += set_flags([*study_sets(name, assets), "keep_top_k=0", *sets])
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, **popen}
    return subprocess.Popen(
        cmd,
        cwd=assets["root"],
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        **popen,
    )


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == pid
            ):
                kids.append(int(entry.name))
        except OSError:  # exited meanwhile
            continue
    return kids


def _alive(pid: int) -> bool:
    """A zombie (exited, not yet reaped by whoever adopted it) counts as gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _kill_all(pids) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _assert_requeued(name: str, storage: str, interrupted: list) -> None:
    """Nothing left RUNNING; each interrupted trial failed and has a copy with the same
    parameters that is WAITING, or that already ran to the end."""
    trials = read_trials(name, storage)
    assert not [t.number for t in trials if t.state.name == "RUNNING"], (
        "nothing may be left RUNNING"
    )
    by_number = {t.number: t for t in trials}
    for trial in interrupted:
        if by_number[trial.number].state.name in FINISHED:
            continue  # it ended on its own before the stop reached it
        assert by_number[trial.number].state.name == "FAIL"
        copies = [t for t in trials if trial.number in t.system_attrs.get("retry_history", [])]
        assert len(copies) == 1 and trial.params.items() <= copies[0].params.items(), (
            "re-queued, same parameters"
        )
        assert copies[0].state.name in ("WAITING", *FINISHED), (
            copies[0].number,
            copies[0].state.name,
            copies[0].user_attrs,
            [(t.number, t.state.name, t.user_attrs.get("fail_reason")) for t in trials],
        )


def _pg_ctl(action: str) -> None:
    version = os.listdir("/etc/postgresql")[0]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action],
        check=True,
        timeout=60,
    )


@e2e
@pytest.mark.serial  # stops the server every test shares
def test_tune_rides_out_a_database_outage(postgres_url, study_name, assets):
    """PostgreSQL stops for 20 s mid-study: the launcher keeps its last counts and says
    once that it waits, its workers retry, and the study still ends at exactly n_trials."""
    proc = _start_tune(
        study_name,
        postgres_url,
        assets,
        "n_trials=10",
        "train.epochs=1",
        "heartbeat.interval=1",
        "heartbeat.grace_period=4",
    )
    stopped, workers = False, []
    try:
        wait_for(
            lambda: [t for t in read_trials(study_name, postgres_url) if t.state.name in FINISHED],
            180,
            "a first finished trial",
        )
        workers = _children(proc.pid)
        _pg_ctl("stop")
        stopped = True
        time.sleep(20)
        _pg_ctl("start")
        stopped = False
        output, _ = proc.communicate(timeout=300)
    finally:
        if stopped:
            _pg_ctl("start")
        _kill_all([proc.pid, *workers])
    assert proc.returncode == 0, output[-5000:]
    assert "Traceback" not in output, output[-5000:]
    said = [line for line in output.splitlines() if line.startswith("database unreachable")]
    assert len(said) == 1, output[-5000:]
    assert output.count("database reachable again") == 1, output[-5000:]
    trials = read_trials(study_name, postgres_url)
    assert len([t for t in trials if t.state.name in FINISHED]) == 10
    assert not [t for t in trials if t.state.name in ("RUNNING", "WAITING")]


@e2e
def test_a_killed_launcher_leaves_no_orphan_workers(postgres_url, study_name, assets):
    """kill -9 `hpo tune` mid-trial: its workers notice their launcher is gone, re-queue
    their running trials and exit, instead of running on unsupervised with PPID 1."""
    # no pruner: the kill lands mid-trial, not in the churn of trials pruned at 1/3 epoch
    proc = _start_tune(study_name, postgres_url, assets, "train.epochs=50", "pruner={name: none}")
    workers = []
    try:
        running = wait_for(
            lambda: running_trials(study_name, postgres_url, 2), 180, "two running trials"
        )
        workers = _children(proc.pid)
        assert len(workers) == 2, workers
        killed = time.monotonic()
        proc.kill()
        output, _ = proc.communicate(timeout=30)
        wait_for(
            lambda: not any(map(_alive, workers)), ORPHAN_SECONDS, "the orphaned workers to exit"
        )
        print(f"workers gone {time.monotonic() - killed:.1f}s after the launcher was killed")
    finally:
        _kill_all([proc.pid, *workers])
    _assert_requeued(study_name, postgres_url, running)


@e2e
def test_a_chunks_study_on_long_posts_runs_to_the_end_within_its_memory_ceiling(
    postgres_url, study_name, assets
):
    """Posts of 40+ chunks, every trial reading them in chunks, each worker under a 3 GiB
    ceiling: the study ends, every trial finished, none past the ceiling."""
    import numpy as np

    from hpo.data.redsm5 import load_redsm5
    from hpo.data.tokenize import chunks_per_text
    from hpo.fixtures import write_sample
    from hpo.models.tokenizer import load_tokenizer

    data = write_sample(
        assets["root"] / f"long-{study_name}", posts=60, seed=1, profile="realistic"
    )
    tokenizer = load_tokenizer(assets["roberta"])
    texts = [post.text for post in load_redsm5(data).posts.values()]
    lengths = np.array(
        [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    )
    assert chunks_per_text(lengths, 64 - 2).max() >= 40, (
        "the sample has posts of 40+ chunks at max_length 64"
    )
    proc = _start_tune(
        study_name,
        postgres_url,
        assets,
        f"data_dir={data}",
        "n_trials=2",
        "train.epochs=1",
        "train.max_length=64",
        "search_space.long_text.choices=[chunks]",
        "search_space.criteria_formulation.choices=[multilabel]",
        "pruner={name: none}",  # every trial runs to its end: the ceiling is what is tested
        flags=("--memory-per-worker", "3G"),
    )
    try:
        output, _ = proc.communicate(timeout=300)
    finally:
        _kill_all([proc.pid])
    assert proc.returncode == 0, output[-3000:]
    trials = read_trials(study_name, postgres_url)
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"], output[-3000:]
    assert all(
        t.params["long_text"] == "chunks" and t.user_attrs["peak_memory_mb"] < 3072 for t in trials
    )


@e2e
def test_a_time_budget_stops_a_study_on_time_keeping_its_trials(postgres_url, study_name, assets):
    """hpo tune --timeout 20s on trials that would run for minutes: each running trial ends at
    the epoch after the deadline and is kept (COMPLETE, saying why), none starts after it,
    nothing is left RUNNING, and hpo status says the budget is spent."""
    started = time.monotonic()
    proc = _start_tune(
        study_name,
        postgres_url,
        assets,
        "train.epochs=400",
        "n_trials=20",
        "heartbeat.grace_period=3600",
        "pruner={name: none}",  # the budget, not a rung, is what ends these trials
        flags=("--timeout", "20s"),
    )
    try:
        output, _ = proc.communicate(timeout=240)
    finally:
        _kill_all([proc.pid])
    took = time.monotonic() - started
    assert proc.returncode == 0, output[-3000:]
    trials = read_trials(study_name, postgres_url)
    assert trials and all(t.state.name == "COMPLETE" for t in trials), [
        (t.number, t.state.name) for t in trials
    ]
    assert all("time budget" in t.user_attrs.get("stopped_by", "") for t in trials), output[-3000:]
    for trial in trials:  # and each trial's line says why it ran fewer epochs than it asked
        assert re.search(
            rf"\] trial {trial.number} COMPLETE .*, ended by the time budget, ", output
        ), output[-3000:]
    assert all(t.user_attrs["epochs_run"] < 400 for t in trials)
    # the budget, and start-up, and an epoch's slack
    deadline = trials[0].datetime_start.timestamp() + 20 + 60
    assert all(t.datetime_complete.timestamp() < deadline for t in trials)
    print(f"stopped {took:.0f}s after start with a 20 s budget; {len(trials)} trials kept")
    status = subprocess.run(
        [sys.executable, "-m", "hpo", "status", study_name, "--storage", postgres_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "time budget: spent" in status.stdout, status.stdout + status.stderr


@e2e
def test_a_worker_killed_outright_leaves_no_trial_running(postgres_url, study_name, assets):
    """A worker SIGKILLed mid-trial (what the kernel's OOM killer does): the launcher names the
    signal, fails that trial at once with the reason and re-queues it, so when the launcher exits
    nothing is left RUNNING, with no heartbeat sweep needed."""
    proc = _start_tune(
        study_name,
        postgres_url,
        assets,
        "train.epochs=50",
        "heartbeat.grace_period=3600",
        "n_trials=2",
        "pruner={name: none}",  # the kill lands mid-trial: no rung ends a trial first
    )
    workers = []
    try:
        running = wait_for(
            lambda: running_trials(study_name, postgres_url, 2), 180, "two running trials"
        )
        workers = _children(proc.pid)
        victim = running[0]
        pid = next(
            w
            for w in workers
            if f"{victim.user_attrs['worker']}"
            in Path(f"/proc/{w}/cmdline").read_text().replace("\0", " ")
        )
        os.kill(pid, signal.SIGKILL)
        wait_for(
            lambda: [
                t
                for t in read_trials(study_name, postgres_url)
                if t.number == victim.number and t.state.name == "FAIL"
            ],
            60,
            "the killed trial to fail",
        )
        for other in workers:
            _kill_all([] if other == pid else [other])  # the rest of the study need not run
        output, _ = proc.communicate(timeout=60)
    finally:
        _kill_all([proc.pid, *workers])
    # a kill -9 by hand, far under the ceiling: not called out of memory (issue #34 item 12)
    assert (
        "died (killed by signal 9 (SIGKILL) — not by hpo, and no sign of running out of memory"
        in output
    ), output[-3000:]
    trials = {t.number: t for t in read_trials(study_name, postgres_url)}
    assert "killed by signal 9" in trials[victim.number].user_attrs["fail_reason"]
    assert not [
        t.number
        for t in trials.values()
        if t.state.name == "RUNNING" and t.user_attrs.get("worker") == victim.user_attrs["worker"]
    ], "the dead worker's trial is not left RUNNING"
    assert [
        t for t in trials.values() if victim.number in t.system_attrs.get("retry_history", [])
    ], "re-queued"


@e2e
def test_sighup_with_the_terminal_closed_stops_workers_and_requeues_their_trials(
    postgres_url, study_name, assets
):
    """The terminal window closes: SIGHUP, and every write to the terminal fails (EIO).
    The launcher still stops its workers (their running trials re-queued) and exits 130."""
    terminal, side = os.openpty()
    proc = _start_tune(
        study_name,
        postgres_url,
        assets,
        "train.epochs=50",
        "pruner={name: none}",  # both trials still run when the terminal closes
        stdout=side,
        stderr=side,
    )
    os.close(side)
    seen, closing = bytearray(), threading.Event()

    def read_terminal():  # what the user saw, for the failure message
        while not closing.is_set():
            if select.select([terminal], [], [], 0.2)[0]:
                try:
                    seen.extend(os.read(terminal, 65536))
                except OSError:
                    return

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    workers = []
    try:
        running = wait_for(
            lambda: running_trials(study_name, postgres_url, 2), 180, "two running trials"
        )
        workers = _children(proc.pid)
        assert len(workers) == 2, workers
        closing.set()
        reader.join()
        os.close(terminal)  # the window closes: writes to the terminal now fail with EIO
        hung_up = time.monotonic()
        proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=90)
        print(f"launcher exited {time.monotonic() - hung_up:.1f}s after SIGHUP")
    finally:
        closing.set()
        _kill_all([proc.pid, *workers])
    assert proc.returncode == 130, seen.decode(errors="replace")[-3000:]
    assert not any(map(_alive, workers)), "the launcher stops its workers before it exits"
    _assert_requeued(study_name, postgres_url, running)


# ---- a setting that fails every trial stops the study --------------------------------------------


@pytest.mark.slow
def test_tune_with_an_encoder_every_trial_fails_on_stops_in_one_line(
    tmp_path, study_name, tiny_roberta
):
    """The encoder passes every check before the study (its weights load whole) but every
    trial fails on it at run time (NaN weights: a checkpoint saved by a diverged run): with
    --restart-dead the study used to burn trials for as long as it was let. Now it stops with
    the reason. (Weights that do not load whole are refused before any study: test_preflight.)"""
    from hpo.fixtures import write_sample
    from tests.support.damaged_encoders import nan_encoder

    broken = nan_encoder(tiny_roberta, tmp_path / "broken-encoder")
    data = write_sample(tmp_path / "data", posts=40, seed=0)
    cmd = [
        sys.executable,
        "-m",
        "hpo",
        "tune",
        str(REPO / "studies" / "criteria-smoke.yaml"),
        "--workers",
        "2",
        "--restart-dead",
        "--no-progress",
        "--storage",
        f"sqlite:///{tmp_path / 'hpo.db'}",
        "--set",
        f"name={study_name}",
        "--set",
        f"data_dir={data}",
        "--set",
        f"output_dir={tmp_path / 'out'}",
        "--set",
        "n_trials=40",
        "--set",
        f"model_paths.tiny-roberta={broken}",
        "--set",
        f"model_paths.tiny-deberta={broken}",
    ]
    started = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert time.monotonic() - started < 240
    line = run.stderr.strip().splitlines()[-1]  # after Optuna's own "A new study created" note
    assert line.startswith(f"hpo: error: stopped study {study_name!r}: ") and "in a row" in line, (
        line
    )
    assert "TrainingDiverged: loss became NaN" in line, "the reason is the trials' own"
    study = read_study(study_name, f"sqlite:///{tmp_path / 'hpo.db'}")
    failed = study.get_trials(states=(optuna.trial.TrialState.FAIL,))
    assert 5 <= len(failed) < 40, "stopped early, not after burning the whole budget"
    assert all(t.user_attrs.get("fail_reason") for t in failed), "every failure says why"
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING,))


# ---- the database refuses the study's queries ----------------------------------------------------


@pytest.fixture
def own_role_database(postgres_url):
    """A PostgreSQL role and a database of its own, dropped afterwards: privileges on the study's
    tables can be revoked from that role without touching anyone else's study."""
    import sqlalchemy as sa

    base = sa.make_url(postgres_url)
    name = f"hpo_rev_{os.getpid()}_{int(time.time())}"
    admin = sa.create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {name} LOGIN"))
        conn.execute(sa.text(f"CREATE DATABASE {name} OWNER {name}"))
    superuser = sa.create_engine(base.set(database=name), isolation_level="AUTOCOMMIT")

    def as_superuser(statement: str) -> None:
        with superuser.connect() as conn:
            conn.execute(sa.text(statement.format(role=name)))

    try:
        yield base.set(username=name, database=name).render_as_string(False), as_superuser
    finally:
        superuser.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            conn.execute(sa.text(f"DROP ROLE IF EXISTS {name}"))
        admin.dispose()


@e2e
def test_the_launcher_rides_out_a_revoked_privilege_and_says_what_to_grant(
    own_role_database, study_name, assets
):
    """REVOKE the role's privileges on the study's tables mid-run, then GRANT them back: the
    launcher's poll gets the same ProgrammingError (InsufficientPrivilege) its workers ride out;
    it must ride it out too (it ended with a traceback, exit 1 and trials left RUNNING), say once
    what to grant, and the study still ends at exactly n_trials."""
    storage, as_superuser = own_role_database
    proc = _start_tune(
        study_name,
        storage,
        assets,
        "n_trials=6",
        "train.epochs=1",
        "heartbeat.interval=1",
        "heartbeat.grace_period=4",
    )
    workers = []
    try:
        wait_for(
            lambda: [t for t in read_trials(study_name, storage) if t.state.name in FINISHED],
            180,
            "a first finished trial",
        )
        workers = _children(proc.pid)
        as_superuser("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
        time.sleep(8)  # the launcher polls every 2 s; the workers' beats and asks fail meanwhile
        as_superuser("GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
        output, _ = proc.communicate(timeout=300)
    finally:
        _kill_all([proc.pid, *workers])
    assert proc.returncode == 0, output[-5000:]
    assert "Traceback" not in output, output[output.find("Traceback") - 500 :][:4000]
    # the launcher's own line (its workers' lines start with a time and the worker's name)
    said = [line for line in output.splitlines() if line.startswith("the database refuses")]
    assert len(said) == 1, output[-5000:]
    assert "permission denied for table" in said[0] and "GRANT SELECT, INSERT, UPDATE" in said[0]
    assert said[0].endswith("waiting for it, the workers retry on their own"), said[0]
    trials = read_trials(study_name, storage)
    assert len([t for t in trials if t.state.name in FINISHED]) == 6
    assert not [t.number for t in trials if t.state.name in ("RUNNING", "WAITING")]


@e2e
def test_ctrl_c_while_the_database_refuses_queries_says_one_line_a_process_and_loses_nothing(
    own_role_database, study_name, assets
):
    """Issue #48 item 11: REVOKE the role's privileges mid-run, then Ctrl-C `hpo tune`. Each
    worker's re-queue and the launcher's summary failed on the database: 17 tracebacks, exit 1,
    two trials left RUNNING that `hpo status` showed as running. Now each process says one
    line, the trials left RUNNING are the ones the workers named (and any the revoke cut off
    inside `study.ask`), `hpo status` calls them stale, and the next `hpo tune` fails them as
    stale and runs their retries, none of them displaced by a fresh trial."""
    storage, as_superuser = own_role_database
    sets = ("train.epochs=3", "heartbeat.interval=1", "heartbeat.grace_period=3")
    proc = _start_tune(study_name, storage, assets, "n_trials=30", *sets)
    workers = []
    try:
        wait_for(
            lambda: [t for t in read_trials(study_name, storage) if t.state.name in FINISHED],
            180,
            "a first finished trial",
        )
        workers = _children(proc.pid)
        as_superuser("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
        time.sleep(4)  # the workers' next queries are refused; they wait, as in an outage
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        as_superuser("GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
        _kill_all([proc.pid, *workers])
    assert proc.returncode == 130, output[-5000:]
    assert "Traceback" not in output, output[output.find("Traceback") - 500 :][:4000]
    said = re.findall(r"\] worker (\S+) interrupted(.*)", output)
    assert len({name for name, _ in said}) == len(said) == 2, output[-5000:]
    lost = sorted(int(n) for n in re.findall(r"could not re-queue its trial (\d+): ", output))
    assert lost, "the workers were mid-trial: their trials could not be re-queued"
    for _, line in said:
        assert "the database refuses the study's queries" in line or line == "", line
    summary = [line for line in output.splitlines() if line.startswith(f"study {study_name!r}")]
    assert len(summary) == 2, output[-3000:]  # the launcher's first line, and its last
    assert (
        "stopped after " in summary[1]
        and "its trials cannot be read: the database " in (summary[1])
    )
    assert f"`hpo status {study_name} --storage " in summary[1], summary[1]

    trials = read_trials(study_name, storage)
    left = sorted(t.number for t in trials if t.state.name == "RUNNING")
    # The revoke can also land inside a worker's `study.ask`, after the trial was created and
    # before the worker learned its number: that worker names no trial, and the trial, never
    # beaten, is left RUNNING for the next sweep (`fail_stale` adopts it).
    unnamed = sorted(set(left) - set(lost))
    assert set(lost) <= set(left), (left, output[-3000:])
    assert len(unnamed) <= sum(line == "" for _, line in said), (left, output[-3000:])
    status = subprocess.run(
        [sys.executable, "-m", "hpo", "status", study_name, "--storage", storage],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    assert f"running=0  stale={len(left)}" in status.stdout, status.stdout
    for number in left:
        assert re.search(rf"trial {number} stale: no heartbeat from \S+ for ", status.stdout)
    assert "running on" not in status.stdout and "ETA" not in status.stdout, status.stdout

    finished = len([t for t in trials if t.state.name in FINISHED])
    again = _start_tune(study_name, storage, assets, f"n_trials={finished + len(left)}", *sets)
    rerun, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rerun[-5000:]
    trials = read_trials(study_name, storage)
    for number in left:
        assert trials[number].state.name == "FAIL"
        assert trials[number].user_attrs["fail_reason"].startswith("no heartbeat for over 3s")
    _assert_requeued(study_name, storage, [trials[number] for number in left])
    assert len([t for t in trials if t.state.name in FINISHED]) == finished + len(left)
    assert not [t.number for t in trials if t.state.name == "WAITING"]


@e2e
def test_a_study_deleted_under_a_running_tune_ends_it_in_one_line(postgres_url, study_name, assets):
    """`optuna delete-study` while trials run: the workers stop (exit 2) and the launcher says
    so in one line and exits 1, instead of a KeyError traceback ('Record does not exist.')."""
    proc = _start_tune(study_name, postgres_url, assets, "train.epochs=50", "n_trials=4")
    workers = []
    try:
        # both workers mid-trial: Optuna's delete_study ignores the IntegrityError of a trial
        # inserted meanwhile, and then deletes nothing
        wait_for(lambda: running_trials(study_name, postgres_url, 2), 180, "two running trials")
        workers = _children(proc.pid)
        delete_until_gone(study_name, postgres_url)
        output, _ = proc.communicate(timeout=120)
    finally:
        _kill_all([proc.pid, *workers])
    assert proc.returncode == 1, output[-5000:]
    assert "Traceback" not in output and "Record does not exist" not in output, output[-5000:]
    last = output.strip().splitlines()[-1]
    assert last == (
        f"hpo: error: study {study_name!r} was deleted from its storage while it ran; its "
        "workers have stopped (`hpo tune` again starts it anew)"
    ), output[-3000:]
    assert not any(map(_alive, workers))
