"""What `hpo tune` says (issue #36): each epoch's metric, one line per trial, and a closing
summary; the summary's lines on a real SQLite study, and the real CLI on tiny encoders."""

from __future__ import annotations

import re

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from hpo.outputs import study_dir
from hpo.run.summary import tune_summary
from hpo.study.records import fail_running, find_trial, requeue
from hpo.study.storage import get_storage
from tests.support import REPO
from tests.support.shared_storage import read_study
from tests.support.tune_cli import run_tune, tune_assets

SMOKE = str(REPO / "studies" / "criteria-smoke.yaml")


def test_the_summary_counts_states_groups_failures_and_names_the_next_commands(
    sqlite_url, study_name
):
    study = optuna.create_study(
        study_name=study_name, storage=get_storage(sqlite_url), direction="maximize"
    )
    study.set_user_attr("metric", "macro_f1")  # as open_study records it
    space = {"learning_rate": FloatDistribution(1e-3, 6e-3, log=True)}
    for value in (0.61234, 0.55):
        trial = study.ask(space)
        # as the objective records it for a post-level metric (none here: shown all the same)
        trial.set_user_attr(
            "validation_interval", {"low": 0.5, "high": 0.7, "level": 0.95, "posts": 9}
        )
        study.tell(trial, value)
    for reason in ("ValueError: bad data", "ValueError: bad data", "OSError: disk full"):
        trial = study.ask(space)
        trial.set_user_attr("fail_reason", reason)
        study.tell(trial, state=TrialState.FAIL)
    interrupted = study.ask(space).number
    fail_running(study, find_trial(study, interrupted), "interrupted (Ctrl-C)")
    requeue(study, find_trial(study, interrupted), 3)

    lines = tune_summary(
        study,
        95.2,
        spec_path=SMOKE,
        overrides=[f"name={study_name}", "n_trials=4"],
        storage=sqlite_url,
        workers=2,
        interrupted=True,
    )
    assert lines[0] == f"study {study_name!r} stopped after 1m35s: 2 of 4 trials finished"
    assert lines[1] == "  trials    2 complete, 3 failed, 1 re-queued, 1 waiting"
    assert lines[2:4] == [
        "  failures  2 × ValueError: bad data",
        "            1 × OSError: disk full",
    ]
    best = study.best_trial
    assert lines[4] == (
        f"  best trial {best.number}: macro_f1 = 0.6123, 95% CI 0.5000-0.7000 over 9 validation "
        f"posts (lr={best.params['learning_rate']:.3g})"
    )
    sets = f"--set name={study_name} --set n_trials=4"
    commands = [line.strip().removeprefix("next").strip() for line in lines[5:]]
    assert commands == [
        f"hpo tune {SMOKE} --workers 2 {sets} --storage {sqlite_url}",
        f"hpo best {study_name} --storage {sqlite_url}",
        f"hpo dashboard {study_name} --storage {sqlite_url}",
        f"hpo finalize {study_name} --storage {sqlite_url}",
    ]
    assert lines[5].startswith("  next      hpo tune ")


def test_trials_a_time_budget_left_queued_are_named_with_the_command_that_runs_them(
    sqlite_url, study_name
):
    """A `--timeout` that ends before the portfolio's last queued point starts leaves it
    WAITING: the summary says so and gives the `hpo tune` (with the same budget) that runs it."""
    study = optuna.create_study(
        study_name=study_name, storage=get_storage(sqlite_url), direction="maximize"
    )
    study.set_user_attr("metric", "macro_f1")
    space = {"learning_rate": FloatDistribution(1e-3, 6e-3, log=True)}
    study.tell(study.ask(space), 0.5)
    for rate in (2e-3, 4e-3):
        study.enqueue_trial({"learning_rate": rate})

    lines = tune_summary(
        study, 3600, spec_path=SMOKE, overrides=["n_trials=4"], storage=sqlite_url, timeout=5400
    )
    assert lines[1] == "  trials    1 complete, 2 waiting"
    assert (
        "  queued    2 not started before the run ended; the next `hpo tune` runs them first"
        in lines
    )
    assert lines[-4] == (
        f"  next      hpo tune {SMOKE} --set n_trials=4 --timeout 90m --storage {sqlite_url}"
    )
    # none left waiting and n_trials reached: no resume command, as before
    done = optuna.create_study()
    for _ in range(6):  # the smoke spec's n_trials
        done.tell(done.ask(space), 0.5)
    plain = tune_summary(done, 3, spec_path=SMOKE, timeout=5400, ended_cleanly=True)
    assert not any("hpo tune" in line or "queued" in line for line in plain)
    # waiting at n_trials (`hpo enqueue` onto a done study): no worker takes it; the same
    # `hpo tune` again, as the summary said, ran nothing and said so forever
    done.enqueue_trial({"learning_rate": 3e-3})
    full = tune_summary(done, 3, spec_path=SMOKE, timeout=5400, ended_cleanly=True)
    assert (
        "  queued    1 waiting, but the study holds its n_trials; raise it (--set n_trials=7) to "
        "run them" in full
    )
    assert not any("hpo tune" in line for line in full), full


def test_a_time_budget_that_ends_the_run_short_of_n_trials_says_so_and_how_to_go_on(
    sqlite_url, study_name
):
    """The workers stop starting trials when the budget's rest cannot take one to its first
    judgement; the run then exits 0 short of n_trials, and the summary only listed best,
    dashboard and finalize, as if the search were done."""
    study = optuna.create_study(
        study_name=study_name, storage=get_storage(sqlite_url), direction="maximize"
    )
    study.set_user_attr("metric", "macro_f1")
    space = {"learning_rate": FloatDistribution(1e-3, 6e-3, log=True)}
    for value in (0.5, 0.6, 0.55, 0.52, 0.58):
        study.tell(study.ask(space), value)
    lines = tune_summary(
        study, 180, spec_path=SMOKE, storage=sqlite_url, workers=2, timeout=180, ended_cleanly=True
    )
    assert lines[0] == f"study {study_name!r} ran for 3m00s: 5 of 6 trials finished"
    assert (
        "  budget    the time budget (3m) ended the run 1 trial short of n_trials; the next "
        "`hpo tune` goes on"
    ) in lines
    assert f"  next      hpo tune {SMOKE} --workers 2 --timeout 3m --storage {sqlite_url}" in lines
    # a run that failed (the breaker stopped it) is not called the budget's doing
    failed = tune_summary(study, 180, spec_path=SMOKE, storage=sqlite_url, timeout=180)
    assert not any(line.startswith(("  budget", "  next      hpo tune")) for line in failed)


def test_a_run_that_started_no_trial_of_a_done_study_says_it_was_already_done(
    sqlite_url, study_name
):
    """Issue #48 item 9: `hpo tune` again on a finished study said "ran for 5.5s: 6 of 6 trials
    finished", as if it had run them."""
    study = optuna.create_study(
        study_name=study_name, storage=get_storage(sqlite_url), direction="maximize"
    )
    study.set_user_attr("metric", "macro_f1")
    space = {"learning_rate": FloatDistribution(1e-3, 6e-3, log=True)}
    for value in (0.5, 0.6, 0.55, 0.52, 0.58, 0.51):  # the smoke spec's 6 trials
        study.tell(study.ask(space), value)
    again = tune_summary(study, 0.0, spec_path=SMOKE, storage=sqlite_url, ended_cleanly=True)
    assert again[0] == (
        f"study {study_name!r} was already done: 6 of 6 trials finished; this run started none"
    )
    # the run that ran them (they started within its hour) says how long it ran
    ran = tune_summary(study, 3600, spec_path=SMOKE, storage=sqlite_url, ended_cleanly=True)
    assert ran[0] == f"study {study_name!r} ran for 1h00m: 6 of 6 trials finished"


@pytest.mark.postgres
def test_a_database_dropped_under_the_run_makes_the_summary_one_line(postgres_url, study_name):
    """Issue #48 item 14: after the workers' "the study's database is gone" line, the summary
    read the study from that database and ended `hpo tune` in a ~150-line traceback."""
    import uuid

    import sqlalchemy as sa

    base = sa.make_url(postgres_url)
    database = f"hpo_gone_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {database}"))
    url = base.set(database=database).render_as_string(False)
    try:
        storage = get_storage(url)
        study = optuna.create_study(study_name=study_name, storage=storage)
        study.tell(study.ask(), 0.5)
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE {database} WITH (FORCE)"))
        # the pool's connections died with it; after the workers' minutes of waiting, each has
        # been idle long enough to be pinged and replaced: the summary connects anew
        storage.engine.dispose()
        lines = tune_summary(study, 620, spec_path=SMOKE, storage=url, workers=2)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        admin.dispose()
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert lines[0].startswith(
        f"study {study_name!r} ran for 10m20s; its trials cannot be read: the study's database "
        "is gone ("
    ), lines[0]
    assert f'database "{database}" does not exist' in lines[0]
    assert "unless it is restored from a backup" in lines[0] and "resume" not in lines[0]


@pytest.mark.parametrize("seconds", [7200, 5400, 45, 90.5])
def test_the_resume_commands_timeout_reads_back_as_the_same_budget(seconds):
    from hpo.cli._common import _seconds
    from hpo.run.summary import _duration_flag

    assert _seconds(_duration_flag(seconds)) == seconds


def test_the_commands_never_show_a_storage_password(study_name, tmp_path):
    study = optuna.create_study(study_name=study_name)  # in memory: only its name is read
    lines = tune_summary(study, 3, spec_path=SMOKE, storage="postgresql://alice:s3cret@db:5432/hpo")
    text = "\n".join(lines)
    assert "s3cret" not in text and "--storage 'postgresql://alice:***@db:5432/hpo'" in text
    assert "  best      no completed trial yet" in lines


def test_a_storage_a_bare_command_finds_anyway_is_not_repeated(study_name, monkeypatch):
    monkeypatch.delenv("HPO_STORAGE", raising=False)  # the default, as the spec leaves it
    study = optuna.create_study(study_name=study_name)
    lines = tune_summary(study, 3, spec_path=SMOKE)
    assert [line.split()[-2:] for line in lines[-3:]] == [
        ["best", study_name],
        ["dashboard", study_name],
        ["finalize", study_name],
    ]


# ---- the real CLI -------------------------------------------------------------------------


@pytest.mark.slow
def test_the_output_says_each_epochs_metric_one_line_per_trial_and_ends_with_a_summary(
    sqlite_url, study_name, assets
):
    """What a user watching `hpo tune` reads (issue #36): each epoch's line with the study's
    metric and the trial's best so far (in the trial's train.log too), one line per trial with
    only the parameters the search varies and the worker named once, and a closing summary."""
    out, study = _smoke_tune(
        study_name,
        sqlite_url,
        assets,
        2,
        "n_trials=3",
        "train.epochs=2",
        "search_space.encoder.choices=[tiny-roberta]",
    )
    epoch_lines = [line for line in out.splitlines() if " epoch 2/2 done: " in line]
    assert len(epoch_lines) == 3, out[-3000:]
    for line in epoch_lines:
        assert re.search(
            r" epoch 2/2 done: macro_f1 0\.\d{4}, best 0\.\d{4} \(epoch [12]\), ", line
        )
    folder = study_dir(assets["root"] / study_name, study_name, study.user_attrs["uid"])
    log = (folder / "trial_0" / "train.log").read_text()
    assert re.search(r"epoch 1/2 done: macro_f1 0\.\d{4}, best 0\.\d{4} \(epoch 1\), loss ", log)

    trial_lines = [line for line in out.splitlines() if re.search(r"\] trial \d+ COMPLETE ", line)]
    assert len(trial_lines) == 3, out[-3000:]
    for trial in study.trials:
        (line,) = [line for line in trial_lines if f"] trial {trial.number} COMPLETE " in line]
        worker = trial.user_attrs["worker"]
        assert (
            f"[{worker}] trial {trial.number} COMPLETE macro_f1={trial.value:.4f}, 2 epochs, "
            in line
        )
        assert line.count(worker) == 1, line  # named once, by the line's prefix
        assert f"lr={trial.params['learning_rate']:.3g} " in line
        # the encoder has one choice here and train settings are no search: neither is shown
        assert not re.search(r"\b(encoder|batch_size|bs|max_len|warmup|class_weighting)=", line)

    summary = out[out.index(f"study {study_name!r} ran for ") :].splitlines()
    assert summary[0].endswith(": 3 of 3 trials finished"), summary
    assert summary[1].split() == ["trials", "3", "complete"]
    best = study.best_trial
    assert summary[2].startswith(f"  best trial {best.number}: macro_f1 = {best.value:.4f} (lr=")
    assert [line.split() for line in summary[3:]] == [
        ["next", "hpo", "best", study_name, "--storage", sqlite_url],
        ["hpo", "dashboard", study_name, "--storage", sqlite_url],
        ["hpo", "finalize", study_name, "--storage", sqlite_url],
    ]


@pytest.mark.slow
def test_a_post_level_trial_line_bounds_its_value_over_the_validation_posts(
    sqlite_url, study_name, assets
):
    """With a post-level metric the worker's line for a trial carries the 95% interval the
    objective recorded (issue #35 item 4): the first place a person compares two trials."""
    out, study = _smoke_tune(
        study_name, sqlite_url, assets, 1, "n_trials=1", "train.epochs=1", "metric=post_macro_f1"
    )
    (trial,) = study.trials
    interval = trial.user_attrs["validation_interval"]
    assert interval["level"] == 0.95 and interval["posts"] > 0
    assert interval["low"] <= trial.value <= interval["high"]
    (line,) = [line for line in out.splitlines() if "] trial 0 COMPLETE " in line]
    assert (
        f"trial 0 COMPLETE post_macro_f1={trial.value:.4f} "
        f"(95% CI {interval['low']:.4f}-{interval['high']:.4f}), 1 epoch, "
    ) in line, line


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_roberta, tiny_deberta):
    return tune_assets(tmp_path_factory.mktemp("summary"), tiny_roberta, tiny_deberta)


def _smoke_tune(study_name, sqlite_url, assets, workers: int, *sets: str):
    """The smoke spec through the real `hpo tune` with ``sets``, no checkpoints and no pruning:
    its output and the study it left."""
    flags = [
        flag for key in ("keep_top_k=0", "pruner={name: none}", *sets) for flag in ("--set", key)
    ]
    run = run_tune("criteria-smoke.yaml", study_name, sqlite_url, assets, workers, *flags)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout, read_study(study_name, sqlite_url)
