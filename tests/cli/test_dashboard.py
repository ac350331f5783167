"""``hpo dashboard`` on a real study made by the real CLI: optuna-dashboard's JSON API, and
its pages rendered by headless Chromium (the JavaScript app, not just the HTML shell)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from hpo.fixtures import write_sample
from tests.support import REPO
from tests.support.headless import CHROMIUM_FLAGS
from tests.support.helpers import free_port

pytestmark = pytest.mark.slow
# the dashboard is a live app: no QUIC, and time to render its charts
DASHBOARD_FLAGS = (*CHROMIUM_FLAGS, "--disable-quic", "--virtual-time-budget=15000")


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny_roberta, tiny_deberta) -> dict:
    """Three finished trials with artifacts, made by `hpo tune` on SQLite."""
    root = tmp_path_factory.mktemp("dashboard")
    name = "evidence-dashboard"
    storage, out = f"sqlite:///{root / 'hpo.db'}", root / "runs"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpo",
            "tune",
            str(REPO / "studies" / "evidence-smoke.yaml"),
            "--workers",
            "1",
            "--no-progress",
            "--storage",
            storage,
            "--set",
            "n_trials=3",
            "--set",
            "train.epochs=1",
            "--set",
            f"name={name}",
            "--set",
            f"data_dir={write_sample(root / 'data', posts=40)}",
            "--set",
            f"output_dir={out}",
            "--set",
            f"train.cache_dir={root / 'cache'}",
            "--set",
            f"model_paths.tiny-roberta={tiny_roberta}",
            "--set",
            f"model_paths.tiny-deberta={tiny_deberta}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return {"name": name, "storage": storage, "artifacts": out / "artifacts", "root": root}


@pytest.fixture(scope="module")
def dashboard(study) -> str:
    """`hpo dashboard` on a free port; its base URL once /api/studies answers."""
    port = free_port()
    log_path = study["root"] / "dashboard.log"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hpo",
                "dashboard",
                "--storage",
                study["storage"],
                "--artifact-dir",
                str(study["artifacts"]),
                "--port",
                str(port),
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _get_json(f"{url}/api/studies")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"the dashboard did not start (exit {proc.poll()}): "
                        f"{log_path.read_text()[-2000:]}"
                    )
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def _study_id(dashboard: str, name: str) -> int:
    studies = _get_json(f"{dashboard}/api/studies")["study_summaries"]
    return next(s["study_id"] for s in studies if s["study_name"] == name)


def render(chromium: str, url: str, screenshot: Path, size: str = "1400,900") -> str:
    """The page's visible text after its JavaScript ran; a screenshot of the same page."""
    run = subprocess.run(
        [
            chromium,
            *DASHBOARD_FLAGS,
            f"--window-size={size}",
            f"--user-data-dir={screenshot.with_suffix('.profile')}",  # fresh, per page
            f"--screenshot={screenshot}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and screenshot.stat().st_size > 20_000, run.stderr[-2000:]
    html = re.sub(r"<(style|script)\b.*?</\1>", " ", run.stdout, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_api_lists_the_study_its_trials_and_their_artifacts(dashboard, study):
    study_id = _study_id(dashboard, study["name"])
    detail = _get_json(f"{dashboard}/api/studies/{study_id}?after=0")
    assert detail["name"] == study["name"]
    trials = detail["trials"]
    assert [t["number"] for t in trials] == [0, 1, 2]
    assert {t["state"] for t in trials} <= {"Complete", "Pruned"}
    complete = [t for t in trials if t["state"] == "Complete"]
    assert complete
    for trial in trials:  # what the trial printed, whatever became of it
        assert "train.log" in {a["filename"] for a in trial["artifacts"]}, trial["artifacts"]
    assert detail["objective_names"] == ["macro_f1"]  # the charts name the metric
    assert "a step is 1/3 of an epoch" in detail["note"]["body"]  # the study note
    for trial in complete:  # metrics for every trial; with keep_top_k=3, every checkpoint is kept
        attrs = {a["key"]: a["value"] for a in trial["user_attrs"]}
        assert "metric:macro_f1" in attrs and "metrics" not in attrs, attrs
        note = trial["note"]["body"]  # the top of the trial's page: value, time, memory, worker
        assert note.startswith(f"**macro_f1 {trial['values'][0]:.4f}** at epoch 1 of 1 · ")
        assert "peak memory" in note and "worker " in note, note
        names = {a["filename"]: a["artifact_id"] for a in trial["artifacts"]}
        assert {"metrics.json", "checkpoint.json"} <= set(names), trial["artifacts"]
        metrics = _get_json(
            f"{dashboard}/artifacts/{study_id}/{trial['trial_id']}/{names['metrics.json']}"
        )
        assert metrics["value"] == pytest.approx(trial["values"][0])


def test_study_page_renders_the_study_in_a_browser(dashboard, study, chromium, tmp_path):
    study_id = _study_id(dashboard, study["name"])
    screenshot = tmp_path / "study.png"
    text = render(chromium, f"{dashboard}/dashboard/studies/{study_id}", screenshot)
    assert f"{study['name']} (id={study_id})" in text, text[:2000]
    assert all(f"trial #{n}" in text for n in range(3)), text[
        :2000
    ]  # the intermediate-values legend
    assert "Best Trial" in text and "learning_rate" in text


def test_study_note_renders_without_the_end_of_hpos_part(dashboard, study, chromium, tmp_path):
    # the note is Markdown, and the dashboard shows raw HTML in it as text: hpo marks where
    # its part ends with something that renders as nothing
    study_id = _study_id(dashboard, study["name"])
    text = render(chromium, f"{dashboard}/dashboard/studies/{study_id}/note", tmp_path / "n.png")
    assert "a step is 1/3 of an epoch" in text, text[:2000]
    assert "end of the part hpo writes" not in text, text[-2000:]


def test_trials_page_lists_each_trials_artifacts_in_a_browser(dashboard, study, chromium, tmp_path):
    study_id = _study_id(dashboard, study["name"])
    text = render(
        chromium,
        f"{dashboard}/dashboard/studies/{study_id}/trials",
        tmp_path / "trials.png",
        "1400,1300",
    )
    assert all(f"Trial {n}" in text for n in range(3)), text[:2000]
    artifacts = text[text.index("Artifacts") :]  # the selected trial's (trial 0's) artifact cards
    assert "metrics.json" in artifacts and "checkpoint.json" in artifacts, text[-2000:]
