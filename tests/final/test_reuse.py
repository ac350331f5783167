"""finalize does not retrain what the search trained: a completed trial's kept checkpoint is
its configuration's run at the trial's seed, where the trial trained as that run would; every
other case is retrained. Studies as ``hpo tune`` makes them, trials told made-up values, each
with a real sealed checkpoint; the end-to-end test runs real processes on real training."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from optuna.trial import TrialState

from hpo.attributes import CHECKPOINT_SEAL_ATTR, TRAINING_DIGEST_ATTR
from hpo.data import SYMPTOMS
from hpo.final.options import FinalizeOptions
from hpo.final.plan import plan, plan_lines
from hpo.final.retrain import train_config
from hpo.final.reuse import NOT_KEPT, judge, link_checkpoint
from hpo.fixtures import write_sample
from hpo.outputs import TrialOutputs, study_dir
from hpo.spec import load_spec
from hpo.study import open_study
from hpo.study.records import load_existing_study, metric_attrs, study_uid
from hpo.study.search import suggest
from tests.support import REPO
from tests.support.helpers import run_hpo

SPEC = str(REPO / "studies" / "criteria-smoke.yaml")

pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # ask/tell, no worker


@pytest.fixture(scope="module")
def sealed(tmp_path_factory, tiny_roberta) -> Path:
    """A classifier saved and sealed as training saves a trial's checkpoint."""
    from hpo.models.classifier import HeadConfig, build_classifier, save_classifier
    from hpo.models.inference import InferenceSettings
    from hpo.models.tokenizer import load_tokenizer

    model = build_classifier("criteria", tiny_roberta, HeadConfig(num_labels=len(SYMPTOMS)))
    settings = InferenceSettings(
        formulation="multilabel",
        labels=tuple(SYMPTOMS),
        max_length=96,
        long_text="truncate",
        thresholds=dict.fromkeys(SYMPTOMS, 0.5),
    )
    folder = tmp_path_factory.mktemp("sealed") / "checkpoint"
    return save_classifier(model, folder, load_tokenizer(tiny_roberta), settings)


def spec_of(tmp_path: Path, *settings: str):
    return load_spec(
        SPEC,
        ["name=reused", f"output_dir={tmp_path / 'out'}", "train.epochs=2", *settings],
        f"sqlite:///{tmp_path / 'db.sqlite'}",
    )


def searched(tmp_path: Path, sealed: Path, *settings: str, **attrs):
    """A study whose one trial completed as ``hpo tune`` records it, its checkpoint kept;
    ``attrs`` replace or (None) drop the trial's attributes. The spec, the study, the trial."""
    spec = spec_of(tmp_path, *settings)
    study = open_study(spec)
    trial = study.ask()
    params = suggest(trial, spec)
    outputs = TrialOutputs(spec.output_dir, spec.name, study_uid(study), 3, spec.direction)
    shutil.copytree(sealed, outputs.checkpoint_dir(trial.number))
    outputs.write_metrics(trial.number, {"value": 0.61})
    config = spec.train_config(params, checkpoint_dir=str(outputs.checkpoint_dir(trial.number)))
    recorded = {
        "seed": config.seed,
        TRAINING_DIGEST_ATTR: config.training_digest(),
        **metric_attrs({"macro_f1": 0.61, "auroc": 0.7012345}),
        "best_epoch": 2,
        "epochs_run": 2,
        "wall_seconds": 12.5,
        "checkpoint": str(outputs.checkpoint_dir(trial.number)),
        CHECKPOINT_SEAL_ATTR: seal_of(sealed),
    }
    for key, value in (recorded | attrs).items():
        if value is not None:
            trial.set_user_attr(key, value)
    study.tell(trial, 0.61)
    return spec, study, study.trials[0]


def seal_of(folder: Path) -> str:
    return json.loads((folder / "classifier.json").read_text())["integrity"]["digest"]


def verdict(spec, study, trial, **changes):
    """``judge`` of the trial for finalize's run at seed 0 of ``spec``, ``changes`` made."""
    config = train_config(spec, trial.params, 0, None)
    return judge(trial, dataclasses.replace(config, **changes), study_uid(study))


def test_a_kept_checkpoint_is_its_configurations_first_seed_and_the_plan_says_so(tmp_path, sealed):
    spec, study, trial = searched(tmp_path, sealed)
    runs = plan(spec, study, 1, 2)

    reuse = runs[0].reuse
    assert reuse.checkpoint == str(Path(trial.user_attrs["checkpoint"]).resolve())
    assert reuse.record == {
        "value": 0.61,
        "best_epoch": 2,
        "metrics": {"macro_f1": 0.61, "auroc": 0.7012},
        "wall_seconds": 12.5,
    }
    assert runs[1].reuse is None, "seed 1 is no trial's: retrained"
    settings = FinalizeOptions(top_k=1, seeds=2).settings()
    lines = plan_lines(spec, study, runs, settings, 2, "fixed")
    assert lines[2:4] == [
        "  retrainings     2 seed(s) each: 2, 1 of them a trial's checkpoint, so 1 to train; "
        "1 at a time (--workers 2)",
        "  reuse           trial_0-seed_0: trial 0's kept checkpoint, not retrained",
    ]


@pytest.mark.parametrize(
    ("at_finalize", "attrs", "changes", "why"),
    [
        ((), {"stopped_by": "the study's time budget, after epoch 1", "epochs_run": 1}, {},
         "it was stopped by the study's time budget, after epoch 1"),
        ((), {"epochs_run": 1}, {}, "it ran 1 of 2 epochs"),
        ((), {"seed": 3}, {}, "it ran seed 3, not 0"),
        ((), {"checkpoint": None}, {}, NOT_KEPT),
        ((), {TRAINING_DIGEST_ATTR: None}, {}, "it recorded no training settings"),
        ((), {CHECKPOINT_SEAL_ATTR: None}, {}, "it recorded no checkpoint seal"),
        (("train.warmup_ratio=0.2",), {}, {}, "it trained with other settings than this"),
        ((), {}, {"train_on": "train+validation"}, "a fold or refit trains on other posts"),
        ((), {}, {"cv_fold": (3, 0)}, "a fold or refit trains on other posts"),
    ],
    ids=["time budget", "cut short", "other seed", "not kept", "older hpo", "no seal", "--set",
         "refit", "cv fold"],
)  # fmt: skip
def test_a_trial_that_is_not_the_run_is_retrained_and_says_why(
    tmp_path, sealed, at_finalize, attrs, changes, why
):
    _, study, trial = searched(tmp_path, sealed, **attrs)
    spec = spec_of(tmp_path, *at_finalize)  # finalize's: with its own --set flags
    reuse = verdict(spec, study, trial, **changes)
    assert reuse.checkpoint is None and reuse.why.startswith(why), reuse.why
    if not attrs:  # the trial is as hpo tune left it: finalize's change alone decides
        assert verdict(spec_of(tmp_path), study, trial).checkpoint is not None


def test_early_stopping_is_part_of_the_schedule_and_its_checkpoint_is_reused(tmp_path, sealed):
    spec, study, trial = searched(tmp_path, sealed, "train.early_stopping_patience=1", epochs_run=1)
    assert verdict(spec, study, trial).checkpoint is not None


def test_a_pruned_trial_is_never_the_run(tmp_path, sealed):
    spec, study, _ = searched(tmp_path, sealed)
    pruned = study.ask()
    suggest(pruned, spec)
    pruned.set_user_attr("checkpoint", "anything")
    study.tell(pruned, state=TrialState.PRUNED)
    reuse = verdict(spec, study, study.trials[1])
    assert reuse.checkpoint is None and reuse.why == "it is pruned, not complete"


def test_a_checkpoint_edited_or_another_trials_is_retrained(tmp_path, sealed):
    spec, study, trial = searched(tmp_path, sealed)
    checkpoint = Path(trial.user_attrs["checkpoint"])
    beside = checkpoint.parent / "metrics.json"
    owner = json.loads(beside.read_text())
    beside.write_text(json.dumps(owner | {"trial": 7}))
    assert "is not recorded as this trial's" in verdict(spec, study, trial).why
    beside.write_text(json.dumps(owner))
    meta = json.loads((checkpoint / "classifier.json").read_text())
    meta["inference"]["thresholds"]["FATIGUE"] = 0.9
    (checkpoint / "classifier.json").write_text(json.dumps(meta))
    reuse = verdict(spec, study, trial)
    assert reuse.checkpoint is None and "fails its seal check" in reuse.why, reuse.why


def test_another_trials_checkpoint_copied_in_is_retrained_saying_so(tmp_path, sealed):
    """Sealed, and beside this trial's metrics.json: only the digest the trial recorded when it
    saved tells the folder holds another model."""
    spec, study, trial = searched(tmp_path, sealed)
    other = tmp_path / "other-trial"
    shutil.copytree(sealed, other)
    from hpo.models.classifier_file import read_inference, rewrite_inference

    rewrite_inference(other, dataclasses.replace(read_inference(other), max_length=64))
    checkpoint = Path(trial.user_attrs["checkpoint"])
    shutil.rmtree(checkpoint)
    shutil.copytree(other, checkpoint)
    reuse = verdict(spec, study, trial)
    assert reuse.checkpoint is None, "another trial's model passed as this trial's"
    assert f"{checkpoint} holds another model than the trial saved there" in reuse.why, reuse.why
    assert "\n" not in reuse.why


def test_the_run_holds_the_checkpoints_files_even_once_the_search_deletes_it(tmp_path, sealed):
    spec, study, trial = searched(tmp_path, sealed)
    reuse = verdict(spec, study, trial)
    model = tmp_path / "runs" / "trial_0-seed_0" / "model"
    model.parent.mkdir(parents=True)
    assert link_checkpoint(reuse, model) is None
    source = Path(reuse.checkpoint)
    head = "head.safetensors"
    assert os.path.samefile(model / head, source / head), "linked, not copied: one copy on disk"
    shutil.rmtree(source)  # dropped out of the search's top-k
    assert verdict(spec, study, trial).checkpoint is None
    from hpo.models.classifier_file import read_checked

    read_checked(model, weights=True)  # whole, and its seal holds
    assert link_checkpoint(reuse, tmp_path / "other") is not None, "gone: retrained instead"
    assert not (tmp_path / "other").exists() and not (tmp_path / "other.reused").exists()


@pytest.mark.slow
def test_finalize_retrains_one_of_two_seeds_and_the_reused_one_is_the_retrained_model(
    tmp_path, tiny_roberta, tiny_deberta
):
    """One real trial (float32, deterministic on CPU) kept its checkpoint: finalize --seeds 2
    --cv 2 --refit train+val trains seed 1, the two folds and the refit, not seed 0, whose
    model predicts what seed 0 retrained here predicts. A training --set at finalize time
    retrains seed 0 too."""
    settings, args, storage = _tuned(
        tmp_path,
        tiny_roberta,
        tiny_deberta,
        "name=reused-e2e",
        "n_trials=1",
        "train.epochs=2",
        "train.mixed_precision='no'",  # float32: YAML reads a bare no as false
    )

    flags = ("--top-k", "1", "--seeds", "2", "--cv", "2", "--refit", "train+val")
    done = run_hpo("finalize", SPEC, *storage, *flags, "--no-progress", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "  retrainings     2 seed(s) each: 2, 1 of them a trial's checkpoint, so 1 to train, "
        "then 3 more of the chosen one; 1 at a time (--workers 1)"
    ) in done.stdout.splitlines(), done.stdout
    spec = load_spec(SPEC, settings, storage[1])
    study = load_existing_study(spec.name, spec.storage)
    final = spec.study_dir(study_uid(study)) / "final"
    runs = final / "runs"
    trained = sorted(path.parent.name for path in runs.glob("*/train.log"))
    assert trained == ["trial_0-seed_0-fold_1of2", "trial_0-seed_0-fold_2of2", "trial_0-seed_1"]
    assert (final / "refit" / "train.log").exists(), "the refit on train + validation trains"
    reused = json.loads((runs / "trial_0-seed_0" / "result.json").read_text())
    trial = study.trials[0]
    assert reused["reused_from_trial"] == 0 and reused["value"] == trial.value
    summary = json.loads((final / "metrics.json").read_text())
    seeds = summary["configurations"][0]["seeds"]
    assert [s.get("reused_from_trial") for s in seeds] == [0, None]
    assert "seed 0 (trial 0's checkpoint, reused)" in (final / "model_card.md").read_text()

    # seed 0 retrained here, in float32 on this CPU, predicts what the reused model does
    from hpo.final.holdout import mean_probabilities
    from hpo.train.loop import train
    from hpo.train.prepare import prepare_data

    config = train_config(spec, trial.params, 0, tmp_path / "retrained")
    result = train(config)
    assert result.value == pytest.approx(trial.value, abs=1e-4)
    data = prepare_data(config)
    probabilities = [
        mean_probabilities(config, data, data.validation, [folder])
        for folder in (runs / "trial_0-seed_0" / "model", tmp_path / "retrained")
    ]
    assert np.abs(probabilities[0] - probabilities[1]).max() < 1e-5

    # a training setting changed at finalize time: the checkpoint is not that run
    other = [*args, "--set", f"output_dir={tmp_path / 'other'}", "--set", "train.warmup_ratio=0.2"]
    changed = run_hpo(
        "finalize", SPEC, *storage, "--top-k", "1", "--seeds", "1", "--no-progress", *other,
        cwd=tmp_path,
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr[-3000:]
    assert (
        "  reuse           trial_0-seed_0: retrained, as it trained with other settings than "
        "this finalize's (a --set here, or the spec changed since)"
    ) in changed.stdout.splitlines(), changed.stdout
    other_final = study_dir(tmp_path / "other", spec.name, study_uid(study)) / "final"
    seed_0 = other_final / "runs" / "trial_0-seed_0"
    assert "reused_from_trial" not in json.loads((seed_0 / "result.json").read_text())
    assert (seed_0 / "train.log").exists()


@pytest.mark.slow
def test_finalize_retrains_a_trial_whose_folder_holds_another_trials_checkpoint(
    tmp_path, tiny_roberta, tiny_deberta
):
    """Two real trials kept their checkpoints; trial 1's copied over trial 0's (sealed, beside
    trial 0's metrics.json) is not trial 0's run: finalize retrains trial 0's seed 0, saying
    why in its plan, and still reuses trial 1's."""
    settings, args, storage = _tuned(
        tmp_path,
        tiny_roberta,
        tiny_deberta,
        "name=moved-checkpoint",
        "n_trials=2",
        "train.epochs=1",
    )
    spec = load_spec(SPEC, settings, storage[1])
    study = load_existing_study(spec.name, spec.storage)
    folders = [Path(t.user_attrs["checkpoint"]) for t in study.trials]
    shutil.rmtree(folders[0])
    shutil.copytree(folders[1], folders[0])

    flags = ("--top-k", "2", "--seeds", "1", "--no-progress")
    done = run_hpo("finalize", SPEC, *storage, *flags, *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stdout.splitlines() if "trial_0-seed_0: retrained, as " in line]
    assert len(said) == 1, done.stdout
    assert f"{folders[0]} holds another model than the trial saved there" in said[0]
    assert "trial_1-seed_0: trial 1's kept checkpoint, not retrained" in done.stdout
    runs = spec.study_dir(study_uid(study)) / "final" / "runs"
    retrained = json.loads((runs / "trial_0-seed_0" / "result.json").read_text())
    assert "reused_from_trial" not in retrained and (runs / "trial_0-seed_0" / "train.log").exists()
    reused = json.loads((runs / "trial_1-seed_0" / "result.json").read_text())
    assert reused["reused_from_trial"] == 1


def _tuned(tmp_path, tiny_roberta, tiny_deberta, *own: str) -> tuple[list[str], list[str], list]:
    """A smoke study tuned by `hpo tune` (one worker, no pruning) on 60 sample posts, with the
    test's ``own`` settings: (its settings, their --set flags, the --storage flag)."""
    settings = [
        *own,
        f"data_dir={write_sample(tmp_path / 'data', posts=60, seed=3)}",
        f"output_dir={tmp_path / 'out'}",
        f"train.cache_dir={tmp_path / 'cache'}",
        "pruner.name=none",
        "pruner.options={}",
        f"model_paths.tiny-roberta={tiny_roberta}",
        f"model_paths.tiny-deberta={tiny_deberta}",
    ]
    args = [arg for setting in settings for arg in ("--set", setting)]
    storage = ["--storage", f"sqlite:///{tmp_path / 'hpo.db'}"]
    tuned = run_hpo("tune", SPEC, *storage, "--workers", "1", "--no-progress", *args, cwd=tmp_path)
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    return settings, args, storage
