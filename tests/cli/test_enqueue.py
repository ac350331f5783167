"""``hpo enqueue``: one parameter set queued on a study, checked against its search space."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from hpo.study.storage import get_storage
from tests.support.helpers import hpo, run_hpo
from tests.support.shared_storage import read_study


def test_enqueue_queues_one_parameter_set_beside_the_warm_start(
    capsys, conditional, sqlite_url, study_name
):
    code, out, err = hpo(
        capsys,
        "enqueue",
        str(conditional),
        "--set",
        "adapter=lora",
        "--set",
        "lora_r=12",
        "--set",
        "learning_rate=5e-5",
        "--storage",
        sqlite_url,
    )
    assert code == 0, err
    assert out.startswith(
        f"queued adapter=lora, lora_r=12, learning_rate=5e-05 on study '{study_name}'"
    ) and out.strip().endswith("the next free worker runs it")
    waiting = optuna.load_study(study_name=study_name, storage=get_storage(sqlite_url)).get_trials(
        states=(TrialState.WAITING,)
    )
    assert [t.system_attrs["fixed_params"] for t in waiting][-1] == {
        "adapter": "lora",
        "lora_r": 12,
        "learning_rate": 5e-5,
    }
    # the spec's two warm-start sets, queued when enqueue created the study, and this one
    assert len(waiting) == 3
    code, out, _ = hpo(
        capsys,
        "enqueue",
        str(conditional),
        "--set",
        "adapter=lora",
        "--set",
        "lora_r=12",
        "--set",
        "learning_rate=5e-5",
        "--storage",
        sqlite_url,
    )
    assert code == 0 and "nothing queued" in out


def test_enqueue_onto_a_study_that_holds_its_n_trials_says_how_it_will_run(
    capsys, conditional, sqlite_url, study_name
):
    """It said "the next free worker runs it", and none ever did: no worker takes a trial past
    n_trials."""
    argv = ["enqueue", str(conditional), "--storage", sqlite_url, "--set", "n_trials=1"]
    assert hpo(capsys, *argv, "--set", "learning_rate=5e-5")[0] == 0
    study = optuna.load_study(study_name=study_name, storage=get_storage(sqlite_url))
    trial = study.ask()
    study.tell(trial, 0.5)
    code, out, err = hpo(capsys, *argv, "--set", "learning_rate=6e-5")
    assert code == 0, err
    assert out.strip().endswith(
        "the study holds its 1 trials (n_trials), so no worker will take it: run hpo tune with "
        "--set n_trials=2 or more"
    ), out


@pytest.mark.parametrize(
    "params, problem",
    [
        (
            ["lerning_rate=1e-4"],
            "--set lerning_rate: 'lerning_rate' is not in search_space; "
            "did you mean 'learning_rate'?",
        ),
        (["learning_rate=0.5"], "--set learning_rate: learning_rate=0.5 is outside its range"),
        (
            ["adapter=prefix"],
            "--set adapter: 'prefix' is not one of adapter's choices ['full', 'lora']",
        ),
        (["head_layers=one"], "--set head_layers: 'one' is not an integer for head_layers"),
        (["lora_r=8"], "--set lora_r: applies only when adapter is lora"),
        (["train.epochs=2"], "--set: give at least one searched parameter"),
        (["lora.r=2"], "name a searched parameter (e.g. --set learning_rate=2e-5) or a spec"),
        (["name=x", "n_trials=true"], "n_trials: must be a number, not a boolean"),
        (["learning_rate"], "expected the form key=value"),
        (
            ["learning_rate=5e-5", "learning_rate=6e-5"],
            "--set learning_rate: given twice (5e-05, then 6e-05); give it once",
        ),
    ],
    ids=[
        "unknown name",
        "out of range",
        "not a choice",
        "not an integer",
        "condition fails",
        "spec override alone",
        "dotted key that is not a spec's",
        "bad spec override",
        "no value",
        "repeated",
    ],
)
def test_enqueue_of_a_bad_parameter_set_is_one_line_exit_2_and_creates_nothing(
    capsys, conditional, sqlite_url, params, problem
):
    argv = [arg for param in params for arg in ("--set", param)]
    code, out, err = hpo(capsys, "enqueue", str(conditional), *argv, "--storage", sqlite_url)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and problem in err, err
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()


def test_enqueue_never_changes_the_studys_spec(capsys, conditional, sqlite_url, study_name):
    """--allow-spec-change lets enqueue queue onto a study made from another spec; it must not
    make that spec the study's (then the command that made the study would be refused)."""
    code, _, err = hpo(
        capsys, "enqueue", str(conditional), "--set", "adapter=full", "--storage", sqlite_url
    )
    assert code == 0, err
    recorded = optuna.load_study(study_name=study_name, storage=get_storage(sqlite_url)).user_attrs
    other = conditional.with_name("more-trials.yaml")
    other.write_text(conditional.read_text().replace("n_trials: 4", "n_trials: 9"))
    code, out, err = hpo(
        capsys,
        "enqueue",
        str(other),
        "--set",
        "learning_rate=5e-5",
        "--allow-spec-change",
        "--storage",
        sqlite_url,
    )
    assert code == 0 and out.startswith("queued learning_rate=5e-05"), err
    assert (
        optuna.load_study(study_name=study_name, storage=get_storage(sqlite_url)).user_attrs
        == recorded
    )
    code, out, err = hpo(
        capsys, "enqueue", str(conditional), "--set", "learning_rate=6e-5", "--storage", sqlite_url
    )
    assert code == 0, err  # the spec that made the study still opens it


def test_enqueue_reaches_a_study_named_by_a_set_override(
    capsys, conditional, sqlite_url, study_name
):
    """hpo tune --set name=X made study X; enqueue takes the same override to queue onto it
    (issue #34 item 14), beside the searched parameters' values."""
    renamed = f"{study_name}-renamed"
    code, out, err = hpo(
        capsys,
        "enqueue",
        str(conditional),
        "--set",
        f"name={renamed}",
        "--set",
        "adapter=full",
        "--storage",
        sqlite_url,
    )
    assert code == 0, err
    assert out.startswith(f"queued adapter=full on study '{renamed}'")
    assert read_study(renamed, sqlite_url).get_trials(states=(TrialState.WAITING,))
    assert study_name not in {s.study_name for s in optuna.get_all_study_summaries(sqlite_url)}


def test_enqueue_without_a_parameter_is_a_usage_error(conditional):
    result = run_hpo("enqueue", str(conditional))
    assert result.returncode == 2 and "--set" in result.stderr and "Traceback" not in result.stderr
