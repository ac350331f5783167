"""``hpo validate``: a spec checked and explained without creating anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpo.fixtures import write_sample
from tests.support.cli_studies import CONDITIONAL, SMOKE
from tests.support.helpers import hpo


def test_validate_names_a_missing_data_directory(capsys, sqlite_url, tmp_path):
    missing = tmp_path / "no-data-here"
    code, out, err = hpo(
        capsys, "validate", str(SMOKE), "--set", f"data_dir={missing}", "--storage", sqlite_url
    )
    assert code == 2
    assert err.count("\n") == 1 and str(missing) in err and "data directory not found" in err
    assert "valid" not in out
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # validate creates nothing


def test_validate_names_a_bad_n_trials(capsys, tmp_path):
    code, _, err = hpo(
        capsys, "validate", str(SMOKE), "--set", "n_trials=0", "--set", f"data_dir={tmp_path}"
    )
    assert code == 2
    assert err.count("\n") == 1 and "n_trials" in err and str(SMOKE) in err


def test_validate_shows_the_conditions_and_the_warm_start(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    write_sample(tmp_path / "data", posts=40, seed=0)
    path = tmp_path / "conditional.yaml"
    path.write_text(
        CONDITIONAL.format(name=study_name, data_dir=tmp_path / "data", encoder=tiny_roberta)
    )
    code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url)
    assert code == 0, err
    assert "lora_r, lora_alpha: sampled only when adapter is lora" in out
    assert "head_hidden_size: sampled only when head_layers in 1, 2" in out
    assert "warm start: 2 parameter sets, queued once when the study is created" in out


def test_validate_warns_when_pruning_on_a_signal_the_metric_does_not_judge_by(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    """prune_on: average_precision for an F1 judged at a fixed 0.5 ranked the configurations
    that end best last (bench pruning_regret); validate says so, and says nothing when the
    threshold is tuned on validation or the pruner judges the metric itself."""
    write_sample(tmp_path / "data", posts=40, seed=0)
    spec = CONDITIONAL.format(name=study_name, data_dir=tmp_path / "data", encoder=tiny_roberta)
    cases = {
        "fixed": ("prune_on: average_precision\nmetric: post_macro_f1\n", True),
        "tuned": (
            "prune_on: average_precision\nmetric: post_macro_f1\n",
            False,
        ),
        "metric itself": ("metric: post_macro_f1\n", False),
    }
    for case, (extra, warned) in cases.items():
        text = extra + spec
        if case == "tuned":
            text = text.replace("max_length: 96}", "max_length: 96, threshold: tuned}")
        path = tmp_path / f"{case.replace(' ', '-')}.yaml"
        path.write_text(text)
        code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url)
        assert code == 0, (case, err)
        said = "warning: prune_on: average_precision ranks how well scores separate" in out
        assert said == warned, (case, out)


def test_validate_reports_the_long_tail_and_a_steps_memory(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    write_sample(tmp_path / "data", posts=60, seed=0, profile="realistic")
    path = tmp_path / "chunks.yaml"
    path.write_text(f"""name: {study_name}
task: criteria
data_dir: {tmp_path / "data"}
n_trials: 1
output_dir: {tmp_path / "out"}
train: {{encoder: {tiny_roberta}, batch_size: 8, long_text: chunks, \
criteria_formulation: multilabel}}
search_space:
  max_length: {{type: categorical, choices: [64, 128]}}
""")
    code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url)
    assert code == 0, err
    tail = re.search(r"posts are ([\d,]+) / ([\d,]+) / ([\d,]+) tokens \(p50 / p99 / max\)", out)
    assert tail and int(tail[3].replace(",", "")) > 500, out
    at_64 = re.search(
        r"long_text=chunks at max_length 64: (\d+) / (\d+) / (\d+) chunks per post", out
    )
    at_128 = re.search(
        r"long_text=chunks at max_length 128: (\d+) / (\d+) / (\d+) chunks per post", out
    )
    assert at_64 and at_128 and int(at_64[3]) > int(at_128[3]) > 1, out
    assert re.search(
        r"a training step holds at most 8 sequences of 128 tokens .* about [\d,]+ MiB", out
    ), out


@pytest.mark.parametrize(
    "setting, key",
    [
        ("train.evidence_loss_weight=inf", "train.evidence_loss_weight"),
        ("train.evidence_loss_weight=1e308", "train.evidence_loss_weight"),
        ("train.weight_decay=inf", "train.weight_decay"),
        ("search_space.learning_rate.high=1e308", "search_space.learning_rate"),
    ],
)
def test_validate_refuses_a_training_number_that_trains_a_nan_model(
    capsys, tmp_path, sqlite_url, setting, key
):
    """#55: learning_rate 1e30 or evidence_loss_weight inf trained a model of NaN weights that
    became the study's best; such a value is refused before anything runs."""
    write_sample(tmp_path / "data", posts=40, seed=0)
    code, out, err = hpo(
        capsys,
        "validate",
        str(SMOKE),
        *("--set", f"data_dir={tmp_path / 'data'}", "--set", setting),
        *("--storage", sqlite_url),
    )
    assert code == 2, out
    assert err.count("\n") == 1 and f" {key}: " in err, err
    assert "finite number" in err or "less than or equal to" in err, err


def test_validate_warns_of_a_setting_no_trials_formulation_reads(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    """Issue #55 item 10: `pooling: mean` beside whole_post, `post_pooling` or
    `evidence_loss_weight` beside multilabel were accepted without a word."""
    write_sample(tmp_path / "data", posts=40, seed=0)
    spec = CONDITIONAL.format(name=study_name, data_dir=tmp_path / "data", encoder=tiny_roberta)
    cases = {
        "whole_post, pooling": ("criteria_formulation: whole_post, pooling: mean", ["pooling"]),
        "multilabel, post_pooling": (
            "criteria_formulation: multilabel, post_pooling: attention, evidence_loss_weight: 1.0",
            ["evidence_loss_weight", "post_pooling"],
        ),
        "whole_post, its own": ("criteria_formulation: whole_post, post_pooling: attention", []),
    }
    for case, (train, warned) in cases.items():
        path = tmp_path / f"{case.replace(', ', '-')}.yaml"
        path.write_text(spec.replace("max_length: 96}", f"max_length: 96, {train}}}"))
        code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url)
        assert code == 0, (case, err)
        said = re.findall(r"warning: train\.(\w+) is read by .* only, and no trial", out)
        assert said == warned, (case, out)


def test_validate_refuses_the_spec_change_tune_would_refuse_and_creates_nothing(
    capsys, tmp_path, study_name, tiny_roberta, tiny_deberta, storage_url
):
    """Validate said "valid" of a study tune then refused: the posts re-saved with CRLF line
    endings are other bytes, so other data, to the study tuned on them."""
    from hpo.spec import load_spec
    from hpo.study import open_study
    from tests.support.tune_cli import study_sets, tune_assets

    assets = tune_assets(tmp_path, tiny_roberta, tiny_deberta, posts=30)
    sets = [f"--set={s}" for s in study_sets(study_name, assets)]
    open_study(load_spec(SMOKE, [s.removeprefix("--set=") for s in sets], storage_url))
    for path in assets["data"].iterdir():  # the same posts, saved on Windows
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    argv = ["validate", str(SMOKE), *sets, "--storage", storage_url]

    code, out, err = hpo(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, out + err
    assert err.startswith(
        f"hpo: error: study {study_name!r} was created from another spec (data: the files "
        "differ from those the study was tuned on ("
    ) and err.rstrip().endswith("pass --allow-spec-change to change it on purpose"), err

    code, out, err = hpo(capsys, *argv, "--allow-spec-change")
    assert code == 0, err
    assert f"study {study_name!r} exists with another spec (data: the files differ" in out
    assert "--allow-spec-change records this one as its own" in out


def test_validate_of_a_new_study_creates_no_database(capsys, tmp_path, tiny_roberta, tiny_deberta):
    from tests.support.tune_cli import study_sets, tune_assets

    assets = tune_assets(tmp_path, tiny_roberta, tiny_deberta, posts=30)
    database = tmp_path / "new.db"
    sets = [f"--set={s}" for s in study_sets("fresh", assets)]
    code, out, err = hpo(
        capsys, "validate", str(SMOKE), *sets, "--storage", f"sqlite:///{database}"
    )
    assert code == 0 and "valid" in out, err
    assert not database.exists()
