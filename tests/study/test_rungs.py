"""Cheap first looks: the pruner's resource is training progress in fractions of an epoch; the
loop evaluates at the rungs inside an epoch, survivors train on to full fidelity, and a trial's
last report is never judged. Real tiny encoders, real Optuna pruners and storages."""

from __future__ import annotations

import optuna
import pytest
import torch
from optuna.trial import TrialState

from hpo.fixtures import write_sample
from hpo.models.classifier import EncoderClassifier
from hpo.run.objective import Objective
from hpo.spec import SpecError, load_spec
from hpo.study import open_study
from hpo.study.search import make_pruner, rung_schedule
from hpo.train.config import TrainConfig
from hpo.train.loop import Looks, train
from tests.support import REPO

STUDIES = REPO / "studies"


def _spec(*overrides: str, file: str = "criteria-smoke.yaml"):
    return load_spec(STUDIES / file, list(overrides), "sqlite://", env={})


# ---- the schedule ------------------------------------------------------------------------------


def test_the_rungs_are_min_resource_times_powers_of_the_reduction_factor_up_to_the_longest():
    spec = _spec(
        "pruner={name: successive_halving, units_per_epoch: 9, "
        "options: {min_resource: 1, reduction_factor: 3}}",
        "train.epochs=4",
    )
    assert rung_schedule(spec) == (1, 3, 9, 27)  # 1/9, 1/3, 1 and 3 epochs; 36 is the end
    hyperband = _spec(
        "pruner={name: hyperband, units_per_epoch: 4, options: {min_resource: 1}}",
        "train.epochs=5",
    )
    assert rung_schedule(hyperband) == (1, 3, 9)  # every bracket's first rung is one of these
    # Hyperband's max_resource is the longest trial in units, not Optuna's "auto"
    assert make_pruner(hyperband)._max_resource == 20
    assert rung_schedule(_spec("pruner={name: median}")) == ()  # judged at epoch ends only


def test_the_default_first_rung_stays_the_end_of_epoch_two_whatever_the_unit():
    """Sub-epoch looks are asked for by name (a min_resource below units_per_epoch); a spec that
    only changes the unit keeps today's safe first rung."""
    for name, attribute in (
        ("successive_halving", "_min_resource"),
        ("hyperband", "_min_resource"),
        ("median", "_n_warmup_steps"),
    ):
        pruner = make_pruner(_spec(f"pruner={{name: {name}, units_per_epoch: 4}}"))
        assert getattr(pruner, attribute) == 8, name


def test_the_shipped_studies_judge_where_the_measurements_put_their_first_rung():
    """The smoke specs look inside the first epoch (the path, on tiny encoders); the supermax
    specs first judge at the end of epoch 2: on recorded curves, looks at 1/9 or 1/3 epoch
    pruned the configuration that ends best in 85% of orders (bench/results/pruning_regret.json)."""
    for path in sorted(STUDIES.glob("*.yaml")):
        spec = load_spec(path, env={})
        rungs, units = rung_schedule(spec), spec.pruner.units_per_epoch
        first = 2 * units if spec.name.endswith("-supermax") else units - 1
        assert rungs and rungs[0] <= first, f"{path.name}: first rung {rungs[:1]} ({units}/epoch)"
        if spec.name.endswith("-supermax"):
            assert rungs[0] == 2 * units, f"{path.name}: judged before epoch 2"


def test_a_unit_below_one_is_a_one_line_spec_error():
    with pytest.raises(SpecError, match=r"pruner\.units_per_epoch") as caught:
        _spec("pruner.units_per_epoch=0")
    assert "\n" not in str(caught.value)


# ---- the loop ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory):
    return write_sample(tmp_path_factory.mktemp("sample"), posts=120, seed=3)


def _config(encoder, data_dir, **overrides) -> TrainConfig:
    base = dict(
        task="criteria",
        criteria_formulation="multilabel",  # one example per post: the unit is posts
        encoder=str(encoder),
        data_dir=str(data_dir),
        epochs=3,
        learning_rate=3e-3,
        batch_size=8,
        max_length=64,
        seed=0,
        warmup_ratio=0.1,
        class_weighting="balanced",
        mixed_precision="no",
    )  # float32: exact comparisons below
    return TrainConfig(**{**base, **overrides})


@pytest.mark.slow
def test_the_loop_evaluates_at_each_look_inside_an_epoch_and_trains_exactly_the_same(
    tiny_roberta, sample_dir
):
    """Looks at 1/4, 3/4 and 9/4 epochs: reported at those steps, after that share of the
    epoch's posts (under one batch late), besides every epoch's end; a look reads validation
    only, so the run trains exactly as without looks."""
    seen = [0]

    def count(module, args, out):  # training forwards only: evaluation runs in eval mode
        if isinstance(module, EncoderClassifier) and module.training:
            seen[0] += out.shape[0]  # logits, one row per post

    reports: list[tuple[int, int, float]] = []
    handle = torch.nn.modules.module.register_module_forward_hook(count)
    try:
        looked = train(
            _config(tiny_roberta, sample_dir),
            report=lambda step, value, metrics: reports.append((step, seen[0], value)),
            looks=Looks(units_per_epoch=4, at=(1, 3, 9)),
        )
    finally:
        handle.remove()
    assert [step for step, _, _ in reports] == [1, 3, 4, 8, 9, 12]
    per_epoch = dict((step, examples) for step, examples, _ in reports)[4]
    assert per_epoch > 8
    for step, examples, _ in reports:
        due = step * per_epoch / 4
        assert due <= examples < due + 8, (step, examples, due)  # batch_size 8
    plain: list[tuple[int, float]] = []
    unlooked = train(_config(tiny_roberta, sample_dir), report=lambda e, v, m: plain.append((e, v)))
    assert [(step // 4, value) for step, _, value in reports if step % 4 == 0] == plain
    assert looked.metrics == unlooked.metrics and looked.best_epoch == unlooked.best_epoch
    assert looked.samples_trained == unlooked.samples_trained == 3 * per_epoch


@pytest.mark.slow
def test_a_stop_asked_for_at_a_look_ends_the_run_at_that_epochs_end_and_progress_shows_it(
    tiny_roberta, sample_dir, caplog, monkeypatch
):
    """A spent time budget keeps the trial with its best epoch: it must have one. The look and
    the epoch's end are one log line each, with the metric; the epoch's with the best so far."""
    from hpo.train import loop

    # only the look and the epoch's end speak, however slow this machine is today
    monkeypatch.setattr(loop, "PROGRESS_SECONDS", float("inf"))
    caplog.set_level("INFO", logger="hpo.train.loop")
    steps: list[int] = []

    def report(step, value, metrics):
        steps.append(step)
        return step == 1

    states: list[dict] = []
    result = train(
        _config(tiny_roberta, sample_dir),
        report=report,
        progress=states.append,
        looks=Looks(4, (1,)),
    )
    assert steps == [1, 4] and result.epochs_run == 1 and result.best_epoch == 1
    # hpo status reads where a trial stands: said at the look (a quarter of the epoch's steps),
    # and the look rides along with every state after it
    assert (states[0]["step"], states[0]["steps"]) == (3, 12)
    assert all(state["last_look"]["epochs"] == 0.25 for state in states)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch ")]
    looked = [line for line in said if "look at" in line]
    assert len(looked) == 1 and looked[0].startswith("epoch 1/3, step 3/12: look at 0.25 epochs, ")
    assert " macro_f1 0." in looked[0] and "best" not in looked[0]  # no epoch has ended yet
    assert len(said) == 2, said
    best = f"{result.value:.4f}"
    assert said[1].startswith(f"epoch 1/3 done: macro_f1 {best}, best {best} (epoch 1), loss ")
    assert "examples/s, ETA " in said[1]


# ---- the objective: never pruned at the last report ---------------------------------------------


@pytest.fixture
def objective_spec(tmp_path, sqlite_url, study_name, tiny_roberta):
    data = write_sample(tmp_path / "data", posts=30, seed=0)
    return load_spec(
        STUDIES / "evidence-smoke.yaml",
        [
            f"name={study_name}",
            f"data_dir={data}",
            f"output_dir={tmp_path / 'out'}",
            "search_space.encoder.choices=[tiny-roberta]",
            f"model_paths.tiny-roberta={tiny_roberta}",
            f"train.cache_dir={tmp_path / 'cache'}",
            "keep_top_k=0",
            # judged once, at the end of epoch 2
            "pruner={name: successive_halving, options: {min_resource: 2, reduction_factor: 3}}",
        ],
        sqlite_url,
        env={},
    )


def _rival(study: optuna.Study, value: float = 1.0) -> None:
    """A finished trial that scored a perfect ``value`` at the rung: every later one is worse."""
    trial = study.ask()
    trial.report(value, step=2)
    assert not trial.should_prune()  # the pruner records it at the rung
    study.tell(trial, value)


@pytest.mark.parametrize(("epochs", "state"), [(2, TrialState.COMPLETE), (3, TrialState.PRUNED)])
@pytest.mark.slow
def test_a_trial_is_never_pruned_at_its_last_report(objective_spec, epochs, state):
    """A 2-epoch trial below its rival at the epoch-2 rung has already paid for all it trains:
    it completes. A 3-epoch one at the same place is still pruned there."""
    spec = objective_spec.model_copy(update={"train": {**objective_spec.train, "epochs": epochs}})
    study = open_study(spec)
    _rival(study)
    study.optimize(Objective(spec), n_trials=1)
    trial = study.trials[-1]
    assert trial.state == state
    assert trial.last_step == 2 and trial.intermediate_values[2] < 1.0
    if state == TrialState.PRUNED:
        assert trial.user_attrs["epochs_run"] == 2


def test_validate_names_the_rungs_in_epochs_and_training_posts(tmp_path):
    from hpo.cli.validate import _rung_notes

    data = write_sample(tmp_path / "data", posts=90, seed=0)
    spec = _spec(f"data_dir={data}", "train.split_fractions=[0.8, 0.1, 0.1]")
    (note,) = _rung_notes(spec)
    assert note.startswith("pruning: successive_halving judges trials at step 1, 3, 9 (3 per epoch")
    assert "1/3 epoch (24 posts), 1 epoch (72 posts), 3 epochs (216 posts)" in note, note
    assert _rung_notes(_spec(f"data_dir={data}", "pruner={name: median}")) == []


# ---- end to end: hpo tune ----------------------------------------------------------------------


@pytest.mark.slow
def test_tune_judges_trials_on_a_third_of_an_epoch_and_trains_survivors_to_the_end(
    storage_url, study_name, tmp_path, tiny_roberta, tiny_deberta
):
    """The shipped smoke study (successive halving, looks at 1/3 and 1 epoch) through the real
    CLI with two workers: every trial is judged after a third of its first epoch; some stop
    there, the survivors train to their last epoch and complete."""
    import subprocess
    import sys

    from tests.support.shared_storage import read_study

    data = write_sample(tmp_path / "data", posts=120, seed=1)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpo",
            "tune",
            str(STUDIES / "criteria-smoke.yaml"),
            "--workers",
            "2",
            "--storage",
            storage_url,
            "--no-progress",
            *("--set", f"name={study_name}", "--set", f"data_dir={data}"),
            *("--set", f"output_dir={tmp_path / 'out'}", "--set", "keep_top_k=0"),
            *("--set", "n_trials=8", "--set", "train.epochs=2"),
            *("--set", f"train.cache_dir={tmp_path / 'cache'}"),
            *("--set", f"model_paths.tiny-roberta={tiny_roberta}"),
            *("--set", f"model_paths.tiny-deberta={tiny_deberta}"),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    trials = read_study(study_name, storage_url).get_trials()
    units, end = 3, 6  # a third of an epoch per step; 2 epochs
    assert len(trials) == 8 and all(t.state.is_finished() for t in trials)
    # judged first after a third of the training posts: one validation pass, not an epoch
    assert all(min(t.intermediate_values) == 1 < units for t in trials)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    assert complete and all(set(t.intermediate_values) == {1, 3, end} for t in complete)
    assert any(t.last_step == 1 for t in pruned), [(t.state, t.last_step) for t in trials]
    assert all(t.last_step < end for t in pruned), "never pruned at a last report"
    log = (tmp_path / "out").rglob("train.log")
    assert any("look at 0.333 epochs" in path.read_text() for path in log)


def test_pruning_regret_replays_sub_epoch_curves_as_the_objective_judges_them():
    """bench pruning_regret on curves with looks inside an epoch: a late bloomer (worst at the
    first look, best at the end) is lost in some orders, and the looks save training."""
    from bench import pruning_regret as pr

    def curve(early: float, final: float) -> dict:
        looks = [{"step": step, "value": early, "post_macro_f1": early} for step in pr.LOOKS]
        epochs = [
            {"step": e * pr.UNITS, "epoch": e, "value": v, "post_macro_f1": v}
            for e in range(1, pr.EPOCHS + 1)
            for v in [early + (final - early) * e / pr.EPOCHS]
        ]
        return {"params": {}, "epochs": looks + epochs}

    configs = [curve(0.5, 0.6), curve(0.1, 0.9), curve(0.4, 0.5), curve(0.3, 0.4)]
    ninth = pr.replay(configs, pr.VARIANTS["ninth_epoch"], orders=30)
    assert 0 < ninth["best_pruned_share"] < 1 and ninth["epochs_share"] < 1
    first_epoch = pr.replay(configs, pr.VARIANTS["first_epoch"], orders=30)
    # pruned at epoch 1 at the earliest: at most EPOCHS configurations per full trial's cost
    assert 1 < first_epoch["configurations_per_full_trial"] <= pr.EPOCHS
    assert first_epoch["configurations_per_full_trial"] == pytest.approx(
        1 / first_epoch["epochs_share"]
    )
    # epoch-end variants read the same curves' epoch ends only
    assert pr.replay(configs, pr.VARIANTS["first_rung_2"], orders=30)["epochs_share"] > 0


def test_a_study_refuses_a_spec_that_reports_in_another_unit(sqlite_url, study_name):
    """Steps in ninths of an epoch beside steps in epochs would meet at the wrong rungs."""
    from hpo.errors import UsageError

    def spec(*overrides):
        return load_spec(
            STUDIES / "criteria-smoke.yaml", [f"name={study_name}", *overrides], sqlite_url, env={}
        )

    open_study(spec("pruner.units_per_epoch=1"))
    with pytest.raises(UsageError) as caught:
        open_study(spec("pruner.units_per_epoch=9"))
    assert "pruner_units_per_epoch: 1 in the study, 9 here" in str(caught.value)
