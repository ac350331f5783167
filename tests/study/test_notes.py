"""What optuna-dashboard shows of a study, checked through Optuna's and optuna-dashboard's own
API: each validation metric as a user attribute of its own, each trial's train.log as an
artifact, the named objective, and the notes (the study's: spec, budget, the unit of a step,
the final model; each trial's: value, time, memory, worker)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from markdown_it import MarkdownIt  # optuna-dashboard's Markdown, roughly (via rich)
from optuna.artifacts import download_artifact, get_all_artifact_meta
from optuna_dashboard import get_note, save_note

from hpo.attributes import METRIC_PREFIX
from hpo.final import record, summary
from hpo.fixtures import write_sample
from hpo.run.objective import Objective
from hpo.spec import StudySpec, load_spec
from hpo.study import best_trial, open_study
from hpo.study.records import (
    artifact_store,
    metric_attrs,
    set_user_attrs,
    study_uid,
    trial_metrics,
    upload,
    write_study_note,
    write_trial_note,
)
from hpo.study.records._notes import HPO_PART_END
from hpo.study.storage import get_storage
from tests.support import REPO

SMOKE = REPO / "studies" / "evidence-smoke.yaml"


def _spec(tmp_path: Path, storage: str, tiny_roberta: Path, name: str) -> StudySpec:
    data = write_sample(tmp_path / "data", posts=30, seed=0)
    return load_spec(
        SMOKE,
        [
            f"name={name}",
            f"data_dir={data}",
            f"output_dir={tmp_path / 'out'}",
            "train.epochs=1",
            "n_trials=4",
            "timeout=7200",
            "search_space.encoder.choices=[tiny-roberta]",
            f"model_paths.tiny-roberta={tiny_roberta}",
            f"train.cache_dir={tmp_path / 'cache'}",
        ],
        storage,
        env={},
    )


@pytest.fixture
def spec(tmp_path, storage_url, study_name, tiny_roberta) -> StudySpec:
    """On SQLite and PostgreSQL: for the tests that train nothing."""
    return _spec(tmp_path, storage_url, tiny_roberta, study_name)


@pytest.fixture
def trained(
    tmp_path, sqlite_url, study_name, tiny_roberta, caplog
) -> tuple[StudySpec, optuna.Study]:
    """One trial trained by the real objective (one backend: training is the slow part)."""
    caplog.set_level("INFO", logger="hpo")  # as a worker logs
    spec = _spec(tmp_path, sqlite_url, tiny_roberta, study_name)
    study = open_study(spec)
    study.optimize(Objective(spec), n_trials=1)
    return spec, study


def test_a_trial_shows_each_metric_its_log_and_a_note_with_what_it_cost(trained, tmp_path):
    spec, study = trained
    trial = study.trials[0]
    metrics = {k: v for k, v in trial.user_attrs.items() if k.startswith(METRIC_PREFIX)}
    assert f"{METRIC_PREFIX}{spec.metric}" in metrics and len(metrics) > 3
    assert all(round(v, 4) == v for v in metrics.values()), metrics  # 4 decimals, one line each
    assert "metrics" not in trial.user_attrs  # no JSON attribute past the page's right edge
    assert trial_metrics(trial)[spec.metric] == pytest.approx(trial.value, abs=5e-5)
    assert best_trial(study).metrics == trial_metrics(trial)  # what hpo best prints

    artifacts = {
        meta.filename: meta
        for meta in get_all_artifact_meta(trial, storage=get_storage(spec.storage))
    }
    assert {"train.log", "metrics.json"} <= set(artifacts)
    log_file = spec.study_dir(study_uid(study)) / "trial_0" / "train.log"
    downloaded = tmp_path / "downloaded.log"
    download_artifact(
        artifact_store=artifact_store(spec.output_dir),
        file_path=str(downloaded),
        artifact_id=artifacts["train.log"].artifact_id,
    )
    assert (
        downloaded.read_text() == log_file.read_text() and "epoch 1/1 done" in log_file.read_text()
    )
    # its note is read where the dashboard serves it: tests/cli/test_dashboard.py


def test_a_study_artifact_takes_the_name_it_is_given(spec, tmp_path):
    # finalize names its card and metrics by the chosen trial and the time: two finalizes of a
    # study leave two artifacts the dashboard tells apart
    study = open_study(spec)
    card = tmp_path / "model_card.md"
    card.write_text("# a card")
    store = artifact_store(spec.output_dir)
    first = upload(store, study, card, "model_card-trial3-20261127T145832Z.md")
    upload(store, study, card, "model_card-trial5-20261128T090000Z.md")
    metas = get_all_artifact_meta(study, storage=get_storage(spec.storage))
    assert sorted(meta.filename for meta in metas) == [
        "model_card-trial3-20261127T145832Z.md",
        "model_card-trial5-20261128T090000Z.md",
    ]
    assert {meta.mimetype for meta in metas} == {"text/markdown"}
    saved = tmp_path / "saved.md"
    download_artifact(artifact_store=store, artifact_id=first, file_path=str(saved))
    assert saved.read_text() == "# a card"


def test_the_study_note_gives_the_spec_the_budget_and_what_a_step_is(spec):
    study = open_study(spec)
    assert study.metric_names == [spec.metric]  # the dashboard's charts name it
    note = get_note(study)
    assert note.startswith(f"## {spec.name}: evidence, maximize validation macro_f1")
    assert (
        "4 finished trials (complete or pruned, over all workers), a time budget of 2h00m" in note
    )
    # evidence-smoke reports every third of an epoch
    assert (
        "a step is 1/3 of an epoch (step 3: the end of epoch 1, step 6: the end of epoch 2)" in note
    )
    assert "learning_rate 0.001–0.006 log" in note and "encoder {tiny-roberta}" in note
    assert note.endswith(HPO_PART_END)


def test_the_study_note_follows_the_spec_and_keeps_what_a_user_wrote_below_it(spec):
    study = open_study(spec)
    save_note(study, get_note(study) + "\n\nmy own finding: lr above 3e-3 diverges")
    raised = spec.model_copy(update={"n_trials": 9})
    open_study(raised)
    note = get_note(study)
    assert "9 finished trials" in note and "4 finished trials" not in note
    assert note.endswith(f"{HPO_PART_END}\n\nmy own finding: lr above 3e-3 diverges")


def test_the_end_of_hpos_part_is_not_shown_and_a_note_with_the_former_end_keeps_its_part(spec):
    # optuna-dashboard renders notes as Markdown with raw HTML shown as text (no rehype-raw
    # unless --allow-unsafe): an <!-- comment --> marker read as a line of the note. CommonMark
    # without HTML renders as it does (tests/cli/test_dashboard.py looks at the page itself).
    study = open_study(spec)
    shown = MarkdownIt("commonmark", {"html": False}).render(get_note(study))
    assert "end of the part" not in shown and "a step is 1/3 of an epoch" in shown
    # a note an earlier version wrote, with the user's own lines below its end
    former = "<!-- end of the part hpo writes: notes below this line are kept -->"
    save_note(study, f"old part\n\n{former}\n\nmy own finding")
    write_study_note(study, spec)
    note = get_note(study)
    assert note.endswith(f"{HPO_PART_END}\n\nmy own finding") and "old part" not in note


def test_after_finalize_the_study_note_names_the_model_and_its_test_score(spec):
    study = open_study(spec)
    interval = {"low": 0.52, "high": 0.66, "resamples": 2000, "seed": 0, "posts": 149}
    test = summary.TestScores(  # what finalize's summary holds for these lines
        metrics={"post_macro_f1": 0.595},
        intervals={"post_macro_f1": interval},
        per_symptom={},
        thresholds={},
    )
    configuration = summary.Configuration(
        rank=1,
        trial=3,
        params={},
        mean=0.66,
        sd=0.02,
        seeds=[
            summary.Seed(seed=0, value=0.64, best_epoch=1, run="3-seed0"),
            summary.Seed(seed=1, value=0.68, best_epoch=1, run="3-seed1"),
        ],
    )
    # as finalize records it (hpo.final.record.record), then writes the note
    study.set_user_attr(
        "final",
        {
            "trial": 3,
            "seed": None,
            "ensemble_of": ["3-seed0", "3-seed1"],
            "model": "/runs/final/model",
        },
    )
    spread = record.seed_spread_line("post_macro_f1", configuration)
    study.set_user_attr("final_seed_spread", spread)
    study.set_user_attr("final_test", record.test_line("post_macro_f1", "out_of_fold", test))
    write_study_note(study, spec)
    note = get_note(study)
    final = note[note.index("## Final model") :]
    assert "trial 3's configuration, an ensemble of 2 seeds: `/runs/final/model`" in final
    assert "post_macro_f1 0.5950 (95% CI 0.5200-0.6600, 149 posts)" in final
    assert "0.6600 ± 0.0200 (sd)" in final


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # ask/tell outside a worker
def test_a_trial_note_reads_what_the_trial_recorded_and_a_pruned_trial_says_why(spec):
    study = open_study(spec)
    trial = study.ask()
    # one transaction, as the objective records its results: not in the live trial's own copy
    set_user_attrs(trial, {"epochs_run": 1, "wall_seconds": 75.2, "worker": "vm/1"})
    write_trial_note(trial, spec.metric, None, "pruned after 1/3 of an epoch at macro_f1=0.2100")
    assert get_note(trial) == (
        "**pruned after 1/3 of an epoch at macro_f1=0.2100** · 1m15s · worker vm/1"
    )
    set_user_attrs(
        trial, {"best_epoch": 1, "peak_memory_mb": 2493.4, **metric_attrs({"macro_f1": 0.61234})}
    )
    write_trial_note(trial, spec.metric, 0.61234)
    assert get_note(trial) == (
        "**macro_f1 0.6123** at epoch 1 of 1 · 1m15s · peak memory 2,493 MB · worker vm/1"
        "\n\nValidation: macro_f1 0.6123"
    )
