"""``hpo validate --estimate``: every choice that changes a trial's cost timed at a worker's
threads, and the time budget priced from it (hpo.run.estimate)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

from hpo.fixtures import write_sample
from hpo.spec import load_spec
from tests.support.helpers import hpo


def _estimate_spec(tmp_path, study_name: str, rest: str):
    """A 40-trial criteria spec on 40 sample posts: the common head, then ``rest``."""
    write_sample(tmp_path / "data", posts=40, seed=0)
    path = tmp_path / "estimate.yaml"
    path.write_text(
        f"name: {study_name}\ntask: criteria\ndata_dir: {tmp_path / 'data'}\nn_trials: 40\n"
        f"output_dir: {tmp_path / 'out'}\n{rest}"
    )
    return path


def test_validate_estimate_times_every_encoder_at_a_workers_threads(
    capsys, tmp_path, study_name, tiny_roberta, tiny_deberta, sqlite_url
):
    """#36: it timed one of two searched encoders, with every thread of the machine while
    hpo tune --workers 2 gives each worker half of them (a ~15x over-estimate)."""
    from hpo.process import available_cpus

    path = _estimate_spec(
        tmp_path,
        study_name,
        f"""timeout: 7200
model_paths: {{tiny: {tiny_roberta}, tiny-deberta: {tiny_deberta}}}
train: {{batch_size: 4, max_length: 64}}
search_space:
  encoder: {{type: categorical, choices: [tiny, tiny-deberta]}}
  epochs: {{type: int, low: 2, high: 4}}
""",
    )
    code, out, err = hpo(
        capsys, "validate", str(path), "--storage", sqlite_url, "--estimate", "--workers", "2"
    )
    assert code == 0, err
    threads = max(1, available_cpus() // 2)
    for encoder in ("tiny", "tiny-deberta"):
        line = re.search(
            rf"compute, encoder={encoder} on cpu \({threads} threads?, 3 steps of a sampled point "
            r"timed at batch 4, "
            r"max_length 64\): an epoch ≈ (\S+) training \((\d+) steps\) \+ (\S+) validation; "
            r"a trial of 2–4 epochs ≈ (\S+)–(\S+)$",
            out,
            re.M,
        )
        assert line, out
    assert re.search(r"  40 trials ≈ \S+ with 2 at a time, drawing these 2 choices alike", out)
    assert re.search(
        r"timeout 2h00m: about \d+ trials of 4 epochs fit \(\d+% of n_trials; \d+ of the "
        r"costliest choice, \d+ of the cheapest\)",
        out,
    ), out
    assert f"timed at {threads} thread" in out and "hpo tune --workers 2" in out
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # validate creates no study
    # the one thing it keeps: the estimate, for the study's plan and hpo status
    (kept,) = (tmp_path / "out").rglob("*.*")
    record = json.loads(kept.read_text())
    assert kept.name == f"{study_name}.json" and record["workers"] == 2
    assert [(timed["params"], timed["threads"]) for timed in record["choices"]] == [
        ({"encoder": "tiny"}, threads),
        ({"encoder": "tiny-deberta"}, threads),
    ]
    assert all(timed["epoch_s"] > 0 for timed in record["choices"])


def test_validate_estimate_times_the_warm_start_the_study_runs_first(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    """A sampled point, not the first trial, was timed: with freeze_layers, batch size or
    max_length searched, one random draw put a trial's cost at half what trials then took."""
    path = _estimate_spec(
        tmp_path,
        study_name,
        f"""model_paths: {{tiny: {tiny_roberta}}}
train: {{encoder: tiny, batch_size: 4}}
search_space:
  max_length: {{type: categorical, choices: [64, 96, 128]}}
  epochs: {{type: int, low: 2, high: 4}}
warm_start:
  - {{max_length: 96}}
""",
    )
    code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url, "--estimate")
    assert code == 0, err
    assert re.search(
        r"compute, encoder=tiny on cpu \(\d+ threads?, 3 steps of the warm start timed at batch 4, "
        r"max_length 96\): an epoch ≈ \S+ training",
        out,
    ), out


_FORMULATIONS = """train: {{encoder: tiny, batch_size: 4, max_length: 64, epochs: 1}}
model_paths: {{tiny: {encoder}}}
search_space:
  learning_rate: {{type: float, low: 1.0e-4, high: 1.0e-3}}
  criteria_formulation: {{type: categorical, choices: [multilabel, pairs]}}
  long_text: {{type: categorical, choices: [truncate, chunks]{when}}}
warm_start:
  - {{criteria_formulation: multilabel, long_text: truncate}}
"""


def test_validate_estimate_prices_every_formulation_and_long_text_the_space_can_choose(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    """Issue #48 item 6: only the branch the warm start drew was timed (multilabel: 20 steps an
    epoch) while a pairs trial takes 180 (9x). Every combination of the encoder, formulation
    and long-text choices is timed now, read from the space: a new formulation is priced too."""
    rest = _FORMULATIONS.format(encoder=tiny_roberta, when="")
    path = _estimate_spec(tmp_path, study_name, rest)
    code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url, "--estimate")
    assert code == 0, err
    steps = {}
    for formulation, long_text in itertools.product(
        ("multilabel", "pairs"), ("truncate", "chunks")
    ):
        line = re.search(
            rf"compute, encoder=tiny formulation={formulation} long_text={long_text} on cpu "
            rf"\(\d+ threads?, 3 steps of (the warm start|a sampled point) timed at batch 4, "
            r"max_length 64\): an epoch ≈ \S+ training \((\d+) steps\)",
            out,
        )
        assert line, out
        steps[formulation, long_text] = int(line[2])
        warm = (formulation, long_text) == ("multilabel", "truncate")
        assert (line[1] == "the warm start") is warm, line[0]
    # each post once, or once per criterion
    assert steps["pairs", "truncate"] >= 8 * steps["multilabel", "truncate"], steps
    assert "  40 trials ≈ " in out and "drawing these 4 choices alike" in out, out
    (kept,) = (tmp_path / "out").rglob("*.json")
    choices = [timed["params"] for timed in json.loads(kept.read_text())["choices"]]
    assert (
        len(choices) == 4
        and {"encoder": "tiny", "criteria_formulation": "pairs", "long_text": "chunks"} in choices
    )


def test_a_conditional_setting_is_priced_only_where_its_condition_holds(tmp_path, study_name):
    from hpo.run.estimate import priced_choices

    when = ", when: {criteria_formulation: multilabel}"
    path = _estimate_spec(tmp_path, study_name, _FORMULATIONS.format(encoder="x", when=when))
    assert priced_choices(load_spec(path, env={})) == [
        {"encoder": "tiny", "criteria_formulation": "multilabel", "long_text": "truncate"},
        {"encoder": "tiny", "criteria_formulation": "multilabel", "long_text": "chunks"},
        {"encoder": "tiny", "criteria_formulation": "pairs"},
    ]


def test_a_step_timing_counts_the_tokens_an_epoch_reads(tiny_roberta, tmp_path):
    from hpo.train.config import TrainConfig
    from hpo.train.prepare import prepare_data
    from hpo.train.setup import time_steps

    config = TrainConfig(
        task="criteria",
        encoder=str(tiny_roberta),
        data_dir=str(write_sample(tmp_path / "data", posts=30, seed=0)),
        batch_size=4,
        max_length=64,
        device="cpu",
        mixed_precision="no",
    )
    timing = time_steps(config, steps=2)
    train = prepare_data(config).train
    assert timing.timed_steps == 2 and timing.seconds_per_token > 0
    assert timing.steps_per_epoch == -(-len(train) // 4)
    assert timing.train_tokens_per_epoch == int(train.tokens.lengths.sum())
    assert timing.validation_tokens == int(prepare_data(config).validation.tokens.lengths.sum())


def test_validate_estimate_prices_the_fidelity_check_against_the_timeout(
    capsys, tmp_path, study_name, tiny_roberta, sqlite_url
):
    """Screening starts only once the check's full runs and their twins have finished: a time
    budget too short for them buys full trials only, and the estimate says so before the hour."""
    said = {}
    for timeout in (1, 365 * 24 * 3600):
        path = _estimate_spec(
            tmp_path / str(timeout),
            study_name,
            f"""timeout: {timeout}
model_paths: {{tiny: {tiny_roberta}}}
train: {{encoder: tiny, batch_size: 4, max_length: 64, epochs: 2}}
search_space:
  learning_rate: {{type: float, low: 1.0e-4, high: 1.0e-3}}
fidelity: {{train_share: 0.25, check: 4}}
""",
        )
        code, out, err = hpo(capsys, "validate", str(path), "--storage", sqlite_url, "--estimate")
        assert code == 0, err
        line = re.search(
            r"fidelity check: 4 full runs and their twins on 25% of the training posts ≈ \S+ "
            r"with 1 at a time \(a screened run ≈ (\S+) of a full one\); (.*)$",
            out,
            re.M,
        )
        assert line, out
        assert 0.25 < float(line[1]) < 1, "set-up and validation stay whole"
        said[timeout] = line[2]
    assert said[1].startswith("longer than the timeout") and "lower fidelity.check" in said[1]
    assert said[365 * 24 * 3600] == "screening starts after it"
