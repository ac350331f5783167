"""whole_post through the CLI on real PostgreSQL: validated, its pooling and sentence loss
searched by two worker processes with a pruner, finalized, and predicted."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hpo.fixtures import write_sample
from hpo.outputs import study_dir
from hpo.predict import load_classifier
from tests.support import REPO
from tests.support.shared_storage import read_study

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
SMOKE = REPO / "studies" / "criteria-smoke.yaml"
# the smoke spec's space, with whole_post's two settings instead of long_text's (which does
# not apply to it)
SPACE = {
    "criteria_formulation": {"type": "categorical", "choices": ["whole_post"]},
    "post_pooling": {"type": "categorical", "choices": ["max", "attention"]},
    "evidence_loss_weight": {"type": "categorical", "choices": [0.0, 1.0]},
}


def _hpo(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hpo", *argv], capture_output=True, text=True, timeout=1200, cwd=cwd
    )


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny_roberta, postgres_url):
    root = tmp_path_factory.mktemp("whole-post")
    name = f"test-whole-post-{os.getpid()}-{time.time_ns() % 10**8}"
    spec = yaml.safe_load(Path(SMOKE).read_text())
    del spec["search_space"]["long_text"]
    spec["search_space"] |= SPACE
    (root / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    data = write_sample(root / "data", posts=90, seed=2, profile="realistic")
    settings = [
        f"name={name}",
        f"data_dir={data}",
        f"output_dir={root / 'out'}",
        f"train.cache_dir={root / 'cache'}",
        "n_trials=6",
        "train.epochs=2",
        "train.max_length=64",
        f"model_paths.tiny-roberta={tiny_roberta}",
        "search_space.encoder={type: categorical, choices: [tiny-roberta]}",
        # whole_post first, so both workers' first trials read whole posts
        "warm_start=[{criteria_formulation: whole_post, post_pooling: max, "
        "evidence_loss_weight: 1.0}, {criteria_formulation: whole_post, "
        "post_pooling: attention, evidence_loss_weight: 1.0}]",
    ]
    args = [arg for setting in settings for arg in ("--set", setting)]
    checked = _hpo("validate", "spec.yaml", "--storage", postgres_url, *args, cwd=root)
    assert checked.returncode == 0, checked.stderr[-3000:]
    tuned = _hpo(
        "tune",
        "spec.yaml",
        "--workers",
        "2",
        "--storage",
        postgres_url,
        "--no-progress",
        *args,
        cwd=root,
    )
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    return {
        "root": root,
        "name": name,
        "args": args,
        "storage": postgres_url,
        "data": data,
        "validate": checked.stdout + checked.stderr,
        "tune": tuned.stdout + tuned.stderr,
    }


def test_validate_plans_whole_posts_and_the_search_runs_them_pruned(study):
    assert "whole_post at max_length 64: about" in study["validate"]
    trials = read_study(study["name"], study["storage"]).trials
    assert len([t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]) == 6
    whole = [t for t in trials if t.params.get("criteria_formulation") == "whole_post"]
    assert len(whole) == 6 and {t.params["post_pooling"] for t in whole[:2]} == {"max", "attention"}
    assert all(1 in t.intermediate_values for t in trials), "judged at a third of an epoch"
    assert any(t.state.name == "PRUNED" for t in trials)
    for trial in (t for t in whole if t.state.name == "COMPLETE"):
        assert trial.user_attrs["token_coverage"]["train"] == 1.0, "every token read"
        assert 0 <= trial.user_attrs["metric:evidence_recall_at_3"] <= 1
    assert "post_pooling=attention evidence_loss=1" in study["tune"]


def test_a_whole_post_model_is_finalized_and_predicts_posts_and_their_evidence(study):
    out = study["root"] / "final-out"
    finalized = _hpo(
        "finalize", study["name"], "--storage", study["storage"], "--top-k", "1", "--seeds", "1",
        "--no-progress", "--set", f"output_dir={out}", cwd=study["root"],
    )  # fmt: skip
    assert finalized.returncode == 0, finalized.stderr[-3000:]
    uid = read_study(study["name"], study["storage"]).user_attrs["uid"]
    final = study_dir(out, study["name"], uid) / "final"
    summary = json.loads((final / "metrics.json").read_text())
    assert "evidence_recall_at_1" in summary["test"]["metrics"]
    model = load_classifier(final / "model", "cpu")
    assert model.settings.formulation == "whole_post" and model.settings.long_text == "sentences"

    posts = study["data"] / "redsm5_posts.csv"
    predictions = study["root"] / "predictions.csv"
    run = _hpo(
        "predict", str(final / "model"), "--input", str(posts), "--out", str(predictions),
        "--no-progress", cwd=study["root"],
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(predictions.read_text().splitlines()) == 91  # a header and 90 posts


def test_a_whole_post_model_alone_explains_posts_with_its_own_evidence(study):
    """Issue #49 item 3: the joined prediction and its report from one whole_post model."""
    (final,) = (study["root"] / "final-out").glob("*/final")
    out, html = study["root"] / "explained.jsonl", study["root"] / "report.html"
    run = _hpo(
        "predict", "--criteria", str(final / "model"), "--input",
        str(study["data"] / "redsm5_posts.csv"), "--out", str(out), "--html", str(html),
        "--no-progress", cwd=study["root"],
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "evidence: the whole_post criteria model ranks each post's sentences itself" in (
        run.stderr
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 90
    found = [s for line in lines for s in line["symptoms"].values() if s["present"]]
    assert found and all(s["evidence"] for s in found), "a present symptom names its sentences"
    assert all(not s["evidence"] for line in lines for s in line["symptoms"].values()
               if not s["present"])  # fmt: skip
    post = lines[0]["symptoms"]
    text = next(row for row in csv.DictReader((study["data"] / "redsm5_posts.csv").open()))["text"]
    for finding in post.values():
        for sentence in finding["evidence"]:
            assert text[sentence["start"] : sentence["end"]] == sentence["text"]
    assert "Evidence model" in html.read_text()
