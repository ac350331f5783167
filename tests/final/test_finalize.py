"""End to end on real PostgreSQL: tune with worker processes, then finalize, then predict."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.artifacts import get_all_artifact_meta
from optuna_dashboard import get_note

from hpo.data import SYMPTOMS
from hpo.data.posts import load_posts
from hpo.final.choose import out_of_fold_thresholds
from hpo.final.holdout import score_on_test, score_on_validation
from hpo.final.record import artifact_name
from hpo.final.summary import FinalSummary
from hpo.fixtures import write_sample
from hpo.outputs import study_dir
from hpo.predict import load_classifier, read_settings
from hpo.spec import load_spec
from hpo.study.records import trial_metrics
from hpo.train.evaluate import objective_value, post_matrix
from hpo.train.prepare import prepare_data
from tests.support import REPO
from tests.support.helpers import run_hpo
from tests.support.shared_storage import read_study

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
SPEC = str(REPO / "studies" / "criteria-smoke.yaml")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, tiny_roberta, tiny_deberta, postgres_url):
    """A small criteria study tuned by two worker processes."""
    root = tmp_path_factory.mktemp("finalize")
    name = f"test-final-{os.getpid()}-{time.time_ns() % 10**8}"
    settings = [
        f"name={name}",
        f"data_dir={write_sample(root / 'data', posts=120, seed=1)}",
        f"output_dir={root / 'out'}",
        f"train.cache_dir={root / 'cache'}",
        "n_trials=4",
        "train.epochs=2",
        # every trial completes, so --top-k 2 finds two configurations however the two workers
        # interleave (successive halving's cuts depend on which trial reports first)
        "pruner.name=none",
        "pruner.options={}",
        f"model_paths.tiny-roberta={tiny_roberta}",
        f"model_paths.tiny-deberta={tiny_deberta}",
    ]
    args = [arg for setting in settings for arg in ("--set", setting)]
    run = run_hpo(
        "tune", SPEC, "--workers", "2", "--storage", postgres_url, "--no-progress", *args, cwd=root
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return {"root": root, "name": name, "args": args, "storage": postgres_url}


def _finalize_argv(tuned, out: Path, *flags: str) -> list[str]:
    """``hpo finalize`` of the tuned study with ``flags``, into its own output_dir ``out``."""
    return [
        "finalize",
        SPEC,
        "--storage",
        tuned["storage"],
        *flags,
        "--no-progress",
        *tuned["args"],
        "--set",
        f"output_dir={out}",
    ]


def _finalize_into(tuned, folder: str, *flags: str) -> Path:
    """``hpo finalize --top-k 1 --seeds 1 *flags``, run to the end; its final/ folder."""
    out = tuned["root"] / folder
    run = run_hpo(
        *_finalize_argv(tuned, out, "--top-k", "1", "--seeds", "1", *flags), cwd=out.parent
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return _final_dir(tuned, out)


def _final_dir(tuned, output_dir: Path) -> Path:
    study = read_study(tuned["name"], tuned["storage"])
    return study_dir(output_dir, tuned["name"], study.user_attrs["uid"]) / "final"


def test_finalize_scores_the_chosen_model_once_and_records_it(tuned):
    study = read_study(tuned["name"], tuned["storage"])
    assert study.metric_names == ["macro_f1"], "the dashboard names the objective"
    assert not [
        key
        for trial in study.trials
        for key in {**trial.user_attrs, **trial_metrics(trial)}
        if key.startswith("test_")
    ], "no trial of a search looks at the test split"

    run = run_hpo(
        "finalize",
        SPEC,
        "--storage",
        tuned["storage"],
        "--top-k",
        "2",
        "--seeds",
        "2",
        "--workers",
        "2",
        "--no-progress",
        *tuned["args"],
        cwd=tuned["root"],
    )
    assert run.returncode == 0, run.stderr[-3000:]
    final = _final_dir(tuned, tuned["root"] / "out")
    summary = json.loads((final / "metrics.json").read_text())
    # the file is FinalSummary's, whole: read back and written again, it is the same text
    written = FinalSummary.read(final / "metrics.json").to_json()
    assert json.dumps(written, indent=2) + "\n" == (final / "metrics.json").read_text()
    assert [len(c["seeds"]) for c in summary["configurations"]] == [2, 2]
    means = [c["mean"] for c in summary["configurations"]]
    assert means == sorted(means, reverse=True), "the best mean validation score is chosen"
    chosen = summary["chosen"]
    assert chosen["trial"] == summary["configurations"][0]["trial"]
    assert {"post_micro_f1", "post_macro_f1", "macro_f1"} <= set(summary["test"]["metrics"])
    assert not [name for name in summary["test"]["metrics"] if name.startswith("tuned_")], (
        "test is scored at the decision thresholds alone"
    )
    assert (
        set(summary["test"]["per_symptom"]) == set(summary["test"]["thresholds"])
        and len(summary["test"]["thresholds"]) == 9
    )
    card = (final / "model_card.md").read_text()
    assert (
        summary["data_fingerprint"] in card
        and "| DEPRESSED_MOOD |" in card
        and "hpo finalize" in card
    )
    # the study's own metric (macro_f1, over the cells) comes first, with its interval over
    # posts as the post-level F1s have theirs, and the card says what each is computed over
    assert list(summary["test"]["intervals"]) == ["macro_f1", "post_macro_f1", "post_micro_f1"]
    own = summary["test"]["intervals"]["macro_f1"]
    assert own["low"] <= summary["test"]["metrics"]["macro_f1"] <= own["high"]
    assert (
        f"| **macro_f1** (the study's: it chose the model) | "
        f"{chosen['validation']['macro_f1']:.4f} | {summary['test']['metrics']['macro_f1']:.4f} | "
        f"{own['low']:.4f} – {own['high']:.4f} |"
    ) in card
    assert (
        f"over the test split's {summary['split_sizes']['test']['posts'] * 9} (post, symptom) cells"
        in card
    )
    test = summary["test"]["metrics"]  # the paper's post macro-F1 first (issue #55 item 12)
    assert f"test post_macro_f1 {test['post_macro_f1']:.4f} (95% CI " in run.stdout
    assert f", macro_f1 {test['macro_f1']:.4f} (95% CI " in run.stdout
    # the spec decides at 0.5 and there is no --cv: the card says so, not "chosen on validation"
    assert summary["thresholds"]["rule"] == "fixed"
    assert set(summary["test"]["thresholds"].values()) == {0.5}
    assert "scored once, at the fixed threshold 0.5 for every symptom" in card
    assert "thresholds chosen on validation only" not in card
    # the chosen configuration's two seeds, averaged into one model (--ensemble seeds, the default)
    members = [seed["run"] for seed in summary["configurations"][0]["seeds"]]
    assert summary["ensemble"]["members"] == members and chosen["seed"] is None
    assert json.loads((final / "model" / "ensemble.json").read_text())["members"] == members
    assert "each seed alone vs their ensemble" in card and "| ensemble (mean probability) |" in card
    seed_models = [final / "runs" / run / "model" for run in members]
    spec = load_spec(SPEC, [a for a in tuned["args"] if a != "--set"], tuned["storage"])
    config = spec.train_config(chosen["params"], checkpoint_dir=None)
    value = lambda models: objective_value(  # noqa: E731 - as finalize judges a model
        score_on_validation(config, models).metrics, "macro_f1", config.threshold
    )
    assert summary["ensemble"]["value"] == pytest.approx(value(seed_models), abs=1e-6)
    # Each seed's validation figures are what its model scores there. Threshold-free: a tiny
    # model's probabilities sit within 1e-4 of 0.5, where the retraining process's batches and
    # threads flip a cell at 0.5 that this process does not (seen: macro_f1 0.558 vs 0.551 at
    # one flipped cell of 27, with AUROC equal).
    recorded = [
        json.loads((final / "runs" / run / "result.json").read_text())["metrics"] for run in members
    ]
    alone = [score_on_validation(config, [path]).metrics for path in seed_models]
    assert [r["auroc"] for r in recorded] == pytest.approx(
        [a["auroc"] for a in alone], abs=0.005
    ), "each seed's validation figures are what its model scores there"

    from hpo.final.model_card import command_line  # never shows a storage password

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            sys, "argv", ["hpo", "finalize", "x.yaml", "--storage", "postgresql://u:s3cret@db/hpo"]
        )
        assert "s3cret" not in command_line() and "db/hpo" in command_line()

    # The card's test numbers are what a fresh evaluation of the saved model gives.
    again = score_on_test(config, final / "model")
    for name, value in summary["test"]["metrics"].items():
        assert again.metrics[name] == pytest.approx(value, abs=1e-5, nan_ok=True), name

    study = read_study(tuned["name"], tuned["storage"])
    recorded = study.user_attrs["final"]
    assert recorded["trial"] == chosen["trial"] and "test_macro_f1" in recorded
    seeds = [s["value"] for s in summary["configurations"][0]["seeds"]]
    assert recorded["validation_macro_f1_seeds"] == pytest.approx(seeds, abs=1e-6)
    # plain lines, which optuna-dashboard's Study User Attributes table shows whole
    assert study.user_attrs["final_seed_spread"] == (
        f"trial {chosen['trial']}'s configuration, validation macro_f1 over 2 seed(s): "
        f"{sum(seeds) / 2:.4f} ± {summary['configurations'][0]['sd']:.4f} (sd), "
        f"min {min(seeds):.4f}, max {max(seeds):.4f}"
    )
    interval = summary["test"]["intervals"]["post_macro_f1"]
    assert (
        f"(95% CI {interval['low']:.4f}-{interval['high']:.4f}, "
        in (study.user_attrs["final_test"])
    )
    assert (
        study.user_attrs["final_test"].startswith(  # the paper's measure, then the study's
            "test, scored once at fixed thresholds: post_macro_f1 "
        )
        and "; macro_f1 " in study.user_attrs["final_test"]
    )
    # the dashboard's study note ends with the chosen model and its test score
    note = get_note(study)
    assert "## Final model (hpo finalize)" in note and study.user_attrs["final_test"] in note

    # hpo best shows how far the chosen configuration's value moved with the seed (and the best
    # trial's, where finalize chose another)
    best = run_hpo("best", tuned["name"], "--storage", tuned["storage"], cwd=tuned["root"])
    assert best.returncode == 0, best.stderr[-2000:]
    assert (
        f"  seed spread of trial {chosen['trial']}'s configuration (finalize's seeds; finalize "
        "chose it): "
        f"macro_f1 {sum(seeds) / 2:.4f} ± {summary['configurations'][0]['sd']:.4f} sd over 2, "
        f"min {min(seeds):.4f}, max {max(seeds):.4f}"
    ) in best.stdout.splitlines(), best.stdout
    names = {meta.filename for meta in get_all_artifact_meta(study, storage=study._storage)}
    stamp = summary["finished"][:19].replace("-", "").replace(":", "")  # 20261127T145832
    assert {
        f"model_card-trial{chosen['trial']}-{stamp}Z.md",
        f"metrics-trial{chosen['trial']}-{stamp}Z.json",
    } <= names

    again = run_hpo(
        "finalize",
        SPEC,
        "--storage",
        tuned["storage"],
        "--no-progress",
        *tuned["args"],
        cwd=tuned["root"],
    )
    assert again.returncode == 0 and "already finalized" in again.stdout, (
        "the test split is scored once"
    )

    # Predictions from the final model: the CLI's equal the Python API's.
    posts = tuned["root"] / "data" / "redsm5_posts.csv"
    out = tuned["root"] / "predictions.csv"
    predicted = run_hpo(
        "predict",
        str(final / "model"),
        "--input",
        str(posts),
        "--out",
        str(out),
        "--no-progress",
        cwd=tuned["root"],
    )
    assert predicted.returncode == 0 and "posts/s" in predicted.stderr, predicted.stderr[-2000:]
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    texts = [post.text for post in load_posts(posts)]
    api = load_classifier(final / "model", device="cpu").predict(texts)
    assert len(rows) == len(texts) == 120
    for row, probabilities in zip(rows, api.probabilities, strict=True):
        assert [float(row[f"{s}_prob"]) for s in api.labels] == pytest.approx(
            probabilities.tolist(), abs=1e-5
        )


def post_matrix_truth(config) -> list:
    """The test split's truth, one 0/1 column per symptom."""
    test = prepare_data(config).test
    truth, _ = post_matrix(test, np.zeros((len(test), test.num_labels)))
    return list(truth.T)


def test_finalize_by_the_studys_name_uses_the_spec_it_was_tuned_with(tuned):
    """Tuned with --set n_trials=4 and more (#36): finalize NAME repeats none of them, its
    retraining children read the spec as finalize resolved it, and the spec file given every
    flag but n_trials=4 is not refused for it (the budget is not the search)."""
    from hpo.study import check_spec

    out = tuned["root"] / "by-name"
    run = run_hpo(
        "finalize",
        tuned["name"],
        "--storage",
        tuned["storage"],
        "--top-k",
        "1",
        "--seeds",
        "2",
        "--workers",
        "2",
        "--no-progress",
        "--set",
        f"output_dir={out}",
        cwd=out.parent,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    final = _final_dir(tuned, out)
    summary = json.loads((final / "metrics.json").read_text())
    assert summary["search"]["n_trials"] == 4 and not summary["search"]["partial"]
    assert len(summary["configurations"][0]["seeds"]) == 2
    read_by_children = json.loads((final / "runs" / "spec.json").read_text())
    assert read_by_children["n_trials"] == 4 and read_by_children["output_dir"] == str(out)
    assert "storage" not in read_by_children, "the storage URL (a password) stays out of files"

    settings = tuned["args"][1::2]
    other_budget = load_spec(SPEC, [s for s in settings if s != "n_trials=4"], tuned["storage"])
    assert other_budget.n_trials != 4
    check_spec(read_study(tuned["name"], tuned["storage"]), other_budget, "not refused")


def test_kill_9_during_finalize_resumes_without_retraining_finished_seeds(tuned):
    out = tuned["root"] / "killed"
    argv = [
        sys.executable,
        "-m",
        "hpo",
        *_finalize_argv(tuned, out, "--top-k", "1", "--seeds", "4"),
    ]
    runs = _final_dir(tuned, out) / "runs"
    process = subprocess.Popen(
        argv, cwd=tuned["root"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 600
    # two: seed 0 is the trial's kept checkpoint, linked in at once; seed 1 is trained
    while (
        len(list(runs.glob("*/result.json"))) < 2
        and time.monotonic() < deadline
        and process.poll() is None
    ):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = {path: path.stat().st_mtime_ns for path in runs.glob("*/result.json")}
    assert 2 <= len(finished) < 4, "killed after the first retraining, before the last"

    rerun = run_hpo(*argv[3:], cwd=tuned["root"])
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"resuming: {len(finished)} of 4" in rerun.stdout
    assert {path: path.stat().st_mtime_ns for path in finished} == finished, (
        "finished seeds were not retrained"
    )
    assert len(list(runs.glob("*/result.json"))) == 4 and (runs.parent / "metrics.json").exists()


@pytest.mark.parametrize(
    "extra, problem",
    [
        ((), "no study named"),
        (("--seeds", "0"), "--seeds: must be a positive"),
        (("--refit", "train+val", "--ensemble", "seeds"), "pass --ensemble none with it"),
        (("--cv", "1"), "--cv K needs K >= 2 folds"),
    ],
)
def test_finalize_bad_input_is_one_line_and_exit_2(tmp_path, extra, problem):
    run = run_hpo(
        "finalize",
        SPEC,
        "--storage",
        f"sqlite:///{tmp_path / 'none.db'}",
        "--set",
        "name=never-tuned",
        *extra,
        cwd=tmp_path,
    )
    assert (
        run.returncode == 2 and problem in run.stderr and len(run.stderr.strip().splitlines()) == 1
    ), run.stderr
    assert not list(tmp_path.rglob("final")), "nothing half-created"


def test_a_study_without_completed_trials_has_nothing_to_finalize(tmp_path):
    from hpo.errors import UsageError
    from hpo.final.pipeline import plan

    spec = load_spec(SPEC, ["name=empty"], f"sqlite:///{tmp_path / 'db.sqlite'}")
    study = optuna.create_study(study_name="empty", storage=spec.storage.text, direction="maximize")
    study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)
    with pytest.raises(UsageError, match="no completed trial to finalize; run hpo tune first"):
        plan(spec, study, top_k=3, seeds=2)


def test_refit_on_train_and_validation_keeps_the_thresholds_chosen_on_validation(tuned):
    final = _finalize_into(tuned, "refit", "--refit", "train+val")
    summary = json.loads((final / "metrics.json").read_text())
    chosen = summary["chosen"]
    assert summary["refit"] == {"on": "train+val", "epochs": chosen["best_epoch"]}
    inference = lambda folder: json.loads((folder / "classifier.json").read_text())["inference"]  # noqa: E731
    assert (
        inference(final / "model")["thresholds"]
        == inference(final / "runs" / chosen["run"] / "model")["thresholds"]
    )
    spec = load_spec(SPEC, [a for a in tuned["args"] if a != "--set"], tuned["storage"])
    plain = spec.train_config(chosen["params"], checkpoint_dir=None)
    refit = dataclasses.replace(plain, train_on="train+validation", epochs=chosen["best_epoch"])
    again = score_on_test(refit, final / "model")
    assert again.metrics["macro_f1"] == pytest.approx(
        summary["test"]["metrics"]["macro_f1"], abs=1e-5
    )
    assert (
        again.split_sizes["train"]["examples"]
        > score_on_test(plain, final / "model").split_sizes["train"]["examples"]
    )
    assert "retrained on train + validation" in (final / "model_card.md").read_text()
    # each finalize of the study (this one, and any other of this module's) left its own card
    study = read_study(tuned["name"], tuned["storage"])
    cards = [
        meta.filename
        for meta in get_all_artifact_meta(study, storage=study._storage)
        if meta.filename.startswith("model_card")
    ]
    named = artifact_name("model_card.md", FinalSummary.model_validate(summary))
    assert len(cards) == len(set(cards)) and named in cards


def test_cv_retrains_the_chosen_configuration_on_k_folds_and_reports_them(tuned):
    final = _finalize_into(tuned, "out-cv", "--cv", "2")
    summary = json.loads((final / "metrics.json").read_text())
    cv = summary["cv"]
    assert cv["k"] == 2 and len(cv["values"]) == 2 and summary["settings"]["cv"] == 2
    records = [
        json.loads((final / "runs" / name / "result.json").read_text()) for name in cv["runs"]
    ]
    assert [r["value"] for r in records] == cv["values"] and [r["fold"] for r in records] == [
        [2, 0],
        [2, 1],
    ]
    assert cv["mean"] == pytest.approx(sum(cv["values"]) / 2)
    assert not any((final / "runs" / name / "model").exists() for name in cv["runs"])
    card = (final / "model_card.md").read_text()
    assert "## Cross-validation: 2 folds of train + validation" in card and "| mean ± sd |" in card
    assert "ensemble" not in summary, "one seed: nothing to average"

    # Out-of-fold thresholds: every train + validation post scored once by the fold model
    # that did not train on it, the thresholds chosen on those probabilities.
    heldout = [
        json.loads((final / "runs" / name / "heldout.json").read_text()) for name in cv["runs"]
    ]
    posts = [post for fold in heldout for post in fold["posts"]]
    sizes = summary["split_sizes"]
    assert len(posts) == len(set(posts)) == sizes["train"]["posts"] + sizes["validation"]["posts"]
    oof = cv["out_of_fold"]
    assert oof["posts"] == len(posts)
    assert oof == out_of_fold_thresholds(heldout).model_dump(), "chosen from the held-out files"
    # decided by the rule --cv sets, saved with the model (hpo predict decides there) and tested
    assert summary["thresholds"]["rule"] == "out_of_fold"
    assert summary["thresholds"]["chosen"] == oof["thresholds"] == summary["test"]["thresholds"]
    assert dict(read_settings(final / "model").thresholds) == oof["thresholds"]
    assert len(set(oof["thresholds"].values())) > 1, "per symptom, not one number"

    # The card compares fixed 0.5, validation-tuned and out-of-fold thresholds on validation.
    spec = load_spec(SPEC, [a for a in tuned["args"] if a != "--set"], tuned["storage"])
    config = spec.train_config(summary["chosen"]["params"], checkpoint_dir=None)
    evaluation = score_on_validation(config, [final / "model"])
    compared = summary["thresholds"]["validation"]
    assert set(compared) == {"fixed", "validation", "out_of_fold"}
    # threshold-free, and the tuned thresholds themselves: see the seeds' check above
    assert compared["fixed"]["auroc"] == pytest.approx(evaluation.metrics["auroc"], abs=0.005)
    assert summary["thresholds"]["candidates"]["validation"] == pytest.approx(
        evaluation.thresholds, abs=1e-3
    )
    assert "## Decision thresholds: the candidates on validation" in card
    assert (
        "| metric | fixed 0.5 | per-symptom thresholds tuned on the validation split | "
        "per-symptom thresholds chosen on out-of-fold predictions (chosen) |"
    ) in card
    assert (
        f"chosen on out-of-fold predictions over the {len(posts)} train + validation posts (--cv 2)"
    ) in card

    # Test: scored once at those thresholds, with 95% bootstrap intervals and each support.
    again = score_on_test(config, final / "model")
    assert summary["test"]["metrics"] == pytest.approx(
        {k: round(v, 6) for k, v in again.metrics.items()}, abs=1e-5, nan_ok=True
    )
    for name in ("post_macro_f1", "post_micro_f1"):
        interval = summary["test"]["intervals"][name]
        assert interval["resamples"] >= 1000 and interval["level"] == 0.95
        assert interval["posts"] == sizes["test"]["posts"]
        assert 0 <= interval["low"] <= summary["test"]["metrics"][name] <= interval["high"] <= 1
        assert f"{interval['low']:.4f} – {interval['high']:.4f} |" in card
    supports = {name: row["support"] for name, row in summary["test"]["per_symptom"].items()}
    assert supports == {
        name: int(truth.sum())
        for name, truth in zip(SYMPTOMS, post_matrix_truth(config), strict=True)
    }
    assert "| symptom | support | threshold |" in card


def test_best_shows_the_spread_of_trials_that_re_ran_the_best_parameters(tmp_path):
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    study = optuna.create_study(study_name="repeats", storage=storage, direction="maximize")
    study.set_user_attr("metric", "macro_f1")
    space = {"lr": optuna.distributions.FloatDistribution(1e-5, 1e-3)}
    for value, lr in [(0.60, 1e-4), (0.70, 1e-4), (0.65, 1e-4), (0.50, 2e-4)]:
        study.enqueue_trial({"lr": lr})
        trial = study.ask(space)
        study.tell(trial, value)
    run = run_hpo("best", "repeats", "--storage", storage, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (
        "  seed spread of trial 1's configuration (trials 0, 1, 2: same parameters): "
        "macro_f1 0.6500 ± 0.0500 sd over 3, min 0.6000, max 0.7000"
    ) in run.stdout.splitlines(), run.stdout


def test_best_shows_the_best_trials_own_seeds_beside_the_configuration_finalize_chose(tmp_path):
    """finalize chooses by the mean over seeds, which need not be the best single trial's
    configuration: hpo best showed the chosen one's spread under the best trial's name."""
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    study = optuna.create_study(study_name="chose", storage=storage, direction="maximize")
    study.set_user_attr("metric", "macro_f1")
    space = {"lr": optuna.distributions.FloatDistribution(1e-5, 1e-3)}
    for value, lr in [(0.54, 1e-4), (0.50, 2e-4)]:
        study.enqueue_trial({"lr": lr})
        study.tell(study.ask(space), value)
    study.set_user_attr(
        "final",  # as finalize records it: trial 1's configuration had the better mean
        {
            "trial": 1,
            "validation_macro_f1_seeds": [0.50, 0.61],
            "validation_macro_f1_seeds_by_trial": {"1": [0.50, 0.61], "0": [0.54, 0.49]},
        },
    )
    run = run_hpo("best", "chose", "--storage", storage, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert lines[0] == "best trial 0: macro_f1 = 0.5400", run.stdout
    assert (
        "  seed spread of trial 0's configuration (finalize's seeds): "
        "macro_f1 0.5150 ± 0.0354 sd over 2, min 0.4900, max 0.5400"
    ) in lines, run.stdout
    assert (
        "  seed spread of trial 1's configuration (finalize's seeds; finalize chose it): "
        "macro_f1 0.5550 ± 0.0778 sd over 2, min 0.5000, max 0.6100"
    ) in lines, run.stdout


def test_best_shows_the_best_value_with_its_validation_interval(tmp_path):
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    study = optuna.create_study(study_name="ci", storage=storage, direction="maximize")
    study.set_user_attr("metric", "post_macro_f1")
    space = {"lr": optuna.distributions.FloatDistribution(1e-5, 1e-3)}
    trial = study.ask(space)
    interval = {"low": 0.41, "high": 0.66, "level": 0.95, "posts": 149}
    trial.set_user_attr("validation_interval", interval)  # as the objective records it
    study.tell(trial, 0.5384)
    run = run_hpo("best", "ci", "--storage", storage, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines()[0] == (
        "best trial 0: post_macro_f1 = 0.5384, 95% CI 0.4100-0.6600 over 149 validation posts"
    )
