"""The joined prediction: a criteria model's symptoms with an evidence model's sentences for
each symptom found (and only those), its pairing rules, its JSON lines and its HTML report
rendered by a real browser."""

from __future__ import annotations

import csv
import json
import logging
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hpo.cli import main
from hpo.data import SYMPTOMS, files_fingerprint, load_descriptions, load_redsm5
from hpo.data.sentences import split_sentences
from hpo.explain import load_pair
from hpo.explain.figures import threshold_text
from hpo.fixtures import write_sample
from hpo.models.classifier_file import write_classifier_file
from hpo.train.config import TrainConfig
from hpo.train.loop import train
from tests.support.headless import CHROMIUM_FLAGS

HOSTILE = "hostile-1"  # a post whose text is markup: the report must show it, never run it
HOSTILE_TEXT = (
    "I can't sleep at all and I feel worthless. <script>document.title='pwned'</script>\n"
    "Nothing is fun anymore & I'm <b>exhausted</b> all day."
)
SETTINGS = {  # tiny, one epoch; tuned thresholds so that some symptoms are found and some are not
    "criteria": dict(
        task="criteria",
        criteria_formulation="multilabel",
        max_length=64,
        threshold="tuned",
        objective_metric="post_macro_f1",
    ),
    "evidence": dict(
        task="evidence",
        max_length=64,
        evidence_scope="positive_criteria",
        evidence_negative_ratio=1.0,
    ),
}


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory) -> Path:
    return write_sample(tmp_path_factory.mktemp("sample"), posts=60, seed=3)


@pytest.fixture(scope="module")
def models(tiny_roberta, sample_dir, tmp_path_factory):
    """name -> a trained model folder: the pair on sample_dir, and criteria models (the cheaper
    half to train) that must not pair with its evidence model."""
    cache: dict[str, Path] = {}
    other_data = write_sample(tmp_path_factory.mktemp("other-sample"), posts=30, seed=4)
    other_texts = tmp_path_factory.mktemp("texts") / "criteria.yaml"
    other_texts.write_text(
        json.dumps({**load_descriptions(), "FATIGUE": "Feels tired all the time."})
    )
    variants = {
        "criteria": ("criteria", sample_dir, {}),
        "evidence": ("evidence", sample_dir, {}),
        "criteria-other-data": ("criteria", other_data, {}),
        "criteria-other-texts": ("criteria", sample_dir, {"descriptions_path": str(other_texts)}),
    }

    def get(name: str) -> Path:
        if name not in cache:
            task, data_dir, extra = variants[name]
            folder = tmp_path_factory.mktemp(name) / "model"
            train(
                TrainConfig(
                    encoder=str(tiny_roberta),
                    data_dir=str(data_dir),
                    epochs=1,
                    learning_rate=3e-3,
                    batch_size=16,
                    seed=0,
                    pooling="mean",
                    mixed_precision="no",
                    device="cpu",
                    checkpoint_dir=str(folder),
                    **SETTINGS[task],
                    **extra,
                )
            )
            cache[name] = folder
        return cache[name]

    return get


@pytest.fixture(scope="module")
def posts(sample_dir) -> list[tuple[str, str]]:
    corpus = load_redsm5(sample_dir).posts
    return [(post.post_id, post.text) for post in list(corpus.values())[:12]] + [
        (HOSTILE, HOSTILE_TEXT)
    ]


@pytest.fixture
def posts_csv(posts, tmp_path) -> Path:
    path = tmp_path / "posts.csv"
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["post_id", "text"])
        writer.writerows(posts)
    return path


def predict_pair(criteria: Path, evidence: Path, input_path: Path, out: Path, *extra: str) -> int:
    return main(
        [
            "predict",
            "--criteria",
            str(criteria),
            "--evidence",
            str(evidence),
            "--input",
            str(input_path),
            "--out",
            str(out),
            "--no-progress",
            "--device",
            "cpu",
            *extra,
        ]
    )


def test_training_records_the_data_fingerprint_a_pair_is_checked_on(models, sample_dir):
    saved = json.loads((models("criteria") / "classifier.json").read_text())
    assert saved["inference"]["data_fingerprint"] == files_fingerprint(sample_dir)


@pytest.mark.slow
def test_joined_prediction_gives_every_symptom_and_the_found_ones_their_sentences(models, posts):
    pair = load_pair(models("criteria"), models("evidence"), device="cpu")
    assert pair.unchecked_data is None
    texts = [text for _, text in posts]
    result = pair.explain(texts, top_k=2)
    alone = pair.evidence.predict_evidence(texts, top_k=None)  # every sentence against all nine
    found = 0
    for text, post, every in zip(texts, result.posts, alone, strict=True):
        sentences = split_sentences(text)  # training's splitter: the same sentences, the same spans
        assert list(post.findings) == list(SYMPTOMS)
        for symptom, finding in post.findings.items():
            if not finding.present:
                assert finding.evidence == ()  # never scored
                continue
            found += 1
            assert [s.rank for s in finding.evidence] == list(range(1, min(2, len(sentences)) + 1))
            for s in finding.evidence:
                assert text[s.start : s.end] == s.text == sentences[s.index].text
                assert (s.start, s.end) == (sentences[s.index].start, sentences[s.index].end)
            # the same scores as the evidence model scoring the whole post
            assert [(s.index, round(s.score, 5)) for s in finding.evidence] == [
                (s.index, round(s.score, 5)) for s in every[symptom][:2]
            ]
    # some found, some not: the test below means something
    assert 0 < found < len(SYMPTOMS) * len(texts)


def test_only_symptoms_found_go_through_the_evidence_model(models, posts):
    pair = load_pair(models("criteria"), models("evidence"), device="cpu")
    texts = [text for _, text in posts]
    rows = []  # sequences per evidence forward pass
    hook = pair.evidence.model.register_forward_pre_hook(
        lambda module, args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    try:
        result = pair.explain(texts, top_k=3)
    finally:
        hook.remove()
    expected = sum(
        len(split_sentences(text)) * len(post.present)
        for text, post in zip(texts, result.posts, strict=True)
    )
    assert (
        0
        < sum(rows)
        == expected
        < len(SYMPTOMS) * sum(len(split_sentences(text)) for text in texts)
    )


def test_cli_writes_one_json_line_per_post_and_the_report(
    models, posts, posts_csv, tmp_path, capsys, caplog
):
    out, html = tmp_path / "out.jsonl", tmp_path / "report.html"
    with caplog.at_level(logging.INFO):
        assert (
            predict_pair(
                models("criteria"), models("evidence"), posts_csv, out, "--html", str(html)
            )
            == 0
        )
    assert "explained 13 posts" in capsys.readouterr().err
    # each half counts every post once: 13 posts are 13, not 26
    said = [record.getMessage() for record in caplog.records]
    assert [line.split(",")[0] for line in said if " posts (" in line] == [
        "criteria: 13/13 posts (100%)",
        "evidence: 13/13 posts (100%)",
    ], said
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["post_id"] for r in records] == [post_id for post_id, _ in posts]
    texts = dict(posts)
    for r in records:
        assert list(r["symptoms"]) == list(SYMPTOMS)
        for finding in r["symptoms"].values():
            assert set(finding) == {"probability", "threshold", "present", "evidence"}
            assert 0 <= finding["probability"] <= 1
            assert finding["present"] == (finding["probability"] >= finding["threshold"])
            assert len(finding["evidence"]) <= (3 if finding["present"] else 0)
            for s in finding["evidence"]:
                assert texts[r["post_id"]][s["start"] : s["end"]] == s["text"]
    page = html.read_text(encoding="utf-8")
    assert "&lt;script&gt;document.title" in page and "<script>document.title" not in page
    assert "&lt;b&gt;exhausted&lt;/b&gt;" in page

    # a rerun replaces both (they are its own outputs); the single-model CSV predict still works
    assert (
        predict_pair(models("criteria"), models("evidence"), posts_csv, out, "--html", str(html))
        == 0
    )
    assert (
        main(
            [
                "predict",
                str(models("criteria")),
                "--input",
                str(posts_csv),
                "--out",
                str(tmp_path / "p.csv"),
                "--no-progress",
                "--device",
                "cpu",
            ]
        )
        == 0
    )


@pytest.mark.parametrize(
    "criteria, evidence, why",
    [
        ("criteria-other-data", "evidence", "trained on different data (fingerprints"),
        ("criteria-other-texts", "evidence", "trained on different criterion texts (FATIGUE)"),
        ("criteria", "criteria", "--evidence {evidence} is a criteria model"),
        ("evidence", "evidence", "--criteria {criteria} is an evidence model"),
    ],
)
def test_a_mismatched_pair_is_one_line_exit_2_and_nothing_written(
    models, posts_csv, tmp_path, capsys, criteria, evidence, why
):
    out, html = tmp_path / "out.jsonl", tmp_path / "report.html"
    assert (
        predict_pair(models(criteria), models(evidence), posts_csv, out, "--html", str(html)) == 2
    )
    lines = capsys.readouterr().err.strip().splitlines()
    named = why.format(criteria=models(criteria), evidence=models(evidence))
    assert len(lines) == 1 and lines[0].startswith("hpo: error: ") and named in lines[0], lines
    assert not out.exists() and not html.exists() and list(tmp_path.iterdir()) == [posts_csv]


@pytest.mark.parametrize(
    "args, why",
    [
        ([], "needs a model folder, or --criteria and --evidence"),
        (["--criteria", "{criteria}"], "--criteria needs --evidence too"),
        (["--evidence", "{evidence}"], "--evidence needs --criteria too"),
        (["{criteria}", "--criteria", "{criteria}", "--evidence", "{evidence}"], "not both"),
        (["--html", "{out}.html"], "--html needs the joined prediction"),
        (
            ["--criteria", "{criteria}", "--evidence", "{evidence}", "--html", "{out}"],
            "is the --out file",
        ),
        (["--criteria", "{criteria}", "--evidence", "{evidence}", "--input", "{bad}"], "text"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    models, posts_csv, tmp_path, capsys, args, why
):
    out, bad = tmp_path / "out.jsonl", tmp_path / "no-text.csv"
    bad.write_text("post_id,body\n1,hello\n", encoding="utf-8")
    names = {"criteria": models("criteria"), "evidence": models("evidence"), "out": out, "bad": bad}
    argv = ["predict", *(a.format(**names) for a in args), "--out", str(out), "--no-progress"]
    if "--input" not in args:
        argv += ["--input", str(posts_csv)]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpo: error: ") and why in lines[0], lines
    assert not out.exists() and not Path(f"{out}.html").exists()


def test_a_model_saved_before_fingerprints_still_predicts_and_pairs_with_a_warning(
    models, posts_csv, tmp_path, capsys
):
    old = {}
    for name in ("criteria", "evidence"):
        old[name] = shutil.copytree(models(name), tmp_path / name)
        meta = json.loads((old[name] / "classifier.json").read_text())
        del meta["inference"]["data_fingerprint"]
        write_classifier_file(old[name], meta)  # sealed as hpo seals every model
    assert (
        main(
            [
                "predict",
                str(old["criteria"]),
                "--input",
                str(posts_csv),
                "--out",
                str(tmp_path / "p.csv"),
                "--no-progress",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert predict_pair(old["criteria"], models("evidence"), posts_csv, tmp_path / "out.jsonl") == 0
    err = capsys.readouterr().err
    assert (
        "hpo: warning: cannot check that the two models were trained on the same data: "
        f"{old['criteria']} was "
        "saved before data fingerprints" in err
    )
    assert (tmp_path / "out.jsonl").exists()


@pytest.mark.slow
def test_the_report_renders_in_a_real_browser_with_badges_and_highlights(
    models, posts, posts_csv, tmp_path, chromium
):
    out, html, shot = tmp_path / "out.jsonl", tmp_path / "report.html", tmp_path / "report.png"
    assert (
        predict_pair(models("criteria"), models("evidence"), posts_csv, out, "--html", str(html))
        == 0
    )
    run = subprocess.run(
        [
            chromium,
            *CHROMIUM_FLAGS,
            "--window-size=1200,1600",
            f"--user-data-dir={tmp_path / 'p'}",
            f"--screenshot={shot}",
            "--dump-dom",
            html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and shot.stat().st_size > 20_000, run.stderr[-2000:]
    dom = run.stdout
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    findings = [f for r in records for f in r["symptoms"].values()]
    found = sum(f["present"] for f in findings)
    assert len(re.findall(r'class="badge present[ "]', dom)) == found > 0
    assert len(re.findall(r'class="badge (?:present|absent)', dom)) == len(SYMPTOMS) * len(records)
    # marked uncertain: exactly the decisions within 0.1 of their threshold
    near = sum(abs(f["probability"] - f["threshold"]) <= 0.1 for f in findings)
    assert len(re.findall(r'class="badge (?:present|absent) uncertain"', dom)) == near
    sentences = {
        (r["post_id"], s["start"])
        for r in records
        for f in r["symptoms"].values()
        for s in f["evidence"]
    }
    assert len(re.findall(r'<mark class="evidence', dom)) == len(sentences) > 0
    assert "Intended use: a research screening aid, not a diagnosis." in dom
    # the index shows each symptom's threshold: the criteria model's own
    saved = json.loads((models("criteria") / "classifier.json").read_text())["inference"]
    shown = dict(re.findall(r'<tr data-symptom="([A-Z_]+)">.*?class="threshold">([0-9.]+)<', dom))
    assert shown == {s: threshold_text(saved["thresholds"][s]) for s in SYMPTOMS}
    assert all(abs(float(shown[s]) - saved["thresholds"][s]) <= 5e-7 for s in SYMPTOMS)
    # a trial's checkpoint has no finalize summary beside it: its test quality is unknown
    assert dom.count("No test figures") == 2
    # the filter's script ran (it fills the line under the index); the post's never did
    assert f"All {len(records)} posts shown." in dom
    assert "<title>Symptoms and their evidence" in dom
    assert (
        dom.count("<script") == 1 and "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    )


def test_a_joined_prediction_to_a_csv_name_is_refused_before_any_post_is_read(
    models, posts_csv, tmp_path, capsys
):
    """Issue #55 item 10: `--out x.csv` in joined mode wrote JSON lines into the .csv."""
    argv = ["predict", "--criteria", str(models("criteria")), "--evidence", str(models("evidence"))]
    for name in ("joined.csv", "joined.txt"):  # .txt held JSON lines too
        out = tmp_path / name
        assert main([*argv, "--input", str(posts_csv), "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err  # the module's models may have just been built: their lines
        lines = [line for line in err.splitlines() if line.startswith("hpo")]
        said = (
            f"hpo: error: --out {out}: the joined prediction is JSON lines (a post's symptoms and "
            "their sentences); name it .jsonl"
        )
        assert "Traceback" not in err and lines == [said]
        assert not out.exists()
