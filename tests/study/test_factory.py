"""The spec's sampler and pruner: the Optuna class each name builds, the options checked against
it, each worker's own seed, and the rungs where the pruner first judges a trial (no training:
trials are built with ask/tell)."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import FloatDistribution

from hpo.spec import SpecError, load_spec
from hpo.study import open_study
from hpo.study.search import StagedSampler, make_pruner, make_sampler
from tests.support import REPO
from tests.support.auto_specs import auto_spec
from tests.support.study_files import smoke_spec

pytestmark = pytest.mark.filterwarnings(
    "ignore:Heartbeat of storage is supposed to be used with Study.optimize"
)
X = {"x": FloatDistribution(0.0, 1.0)}


@pytest.mark.parametrize(
    ("name", "options", "expected"),
    [
        ("tpe", "{n_startup_trials: 3}", optuna.samplers.TPESampler),
        ("gp", "{n_startup_trials: 3}", optuna.samplers.GPSampler),
        ("random", "{}", optuna.samplers.RandomSampler),
        ("cmaes", "{n_startup_trials: 3}", optuna.samplers.CmaEsSampler),
        ("auto", "{n_startup_trials: 3}", StagedSampler),  # GP, then TPE
    ],
)
def test_every_sampler_name_builds_its_optuna_class(name, options, expected):
    sampler = make_sampler(
        smoke_spec(f"sampler.name={name}", f"sampler.options={options}"), "host/0"
    )
    assert type(sampler) is expected


@pytest.mark.parametrize("name", ["tpe", "gp", "random", "cmaes", "auto"])
@pytest.mark.slow
def test_every_sampler_runs_trials_past_its_startup(storage_url, study_name, name):
    """Building a sampler is not enough: CMA-ES needs the cmaes package once it starts sampling."""
    from hpo.run.objective import suggest

    spec = smoke_spec(
        f"sampler.name={name}",
        "sampler.options={n_startup_trials: 2}" if name != "random" else "sampler.options={}",
        storage=storage_url,
        name=study_name,
    )
    study = open_study(spec)
    for number in range(5):
        trial = study.ask()
        study.tell(trial, float(number % 3) + suggest(trial, spec)["learning_rate"])
    assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 5


def test_cmaes_is_refused_behind_the_storage_proxy():
    spec = smoke_spec("sampler.name=cmaes", "sampler.options={}", storage="grpc://127.0.0.1:13999")
    with pytest.raises(SpecError, match="cmaes unpickles its state"):
        make_sampler(spec, "host/0")


@pytest.mark.parametrize(
    ("name", "options", "expected"),
    [
        ("median", "{n_startup_trials: 2, n_warmup_steps: 1}", optuna.pruners.MedianPruner),
        ("hyperband", "{min_resource: 1, reduction_factor: 3}", optuna.pruners.HyperbandPruner),
        ("successive_halving", "{reduction_factor: 2}", optuna.pruners.SuccessiveHalvingPruner),
        (
            "patient",
            "{patience: 2, wrapped: {name: median, options: {n_startup_trials: 1}}}",
            optuna.pruners.PatientPruner,
        ),
        ("none", "{}", optuna.pruners.NopPruner),
    ],
)
def test_every_pruner_name_builds_its_optuna_class(name, options, expected):
    assert (
        type(make_pruner(smoke_spec(f"pruner.name={name}", f"pruner.options={options}")))
        is expected
    )


def test_bad_wrapped_pruner_option_names_pruner_options():
    spec = smoke_spec(
        "pruner.name=patient",
        "pruner.options={patience: 1, wrapped: {name: median, options: {bogus: 1}}}",
    )
    with pytest.raises(SpecError, match="pruner.options"):
        make_pruner(spec)


def first_x(sampler: optuna.samplers.BaseSampler) -> float:
    return optuna.create_study(sampler=sampler).ask(X).params["x"]


def test_each_worker_gets_its_own_seed_and_keeps_it():
    spec = smoke_spec("sampler.seed=7")
    a, b = first_x(make_sampler(spec, "host/a")), first_x(make_sampler(spec, "host/b"))
    assert a != b  # N workers with one seed would propose the same parameters N times
    assert first_x(make_sampler(spec, "host/a")) == a
    assert first_x(make_sampler(smoke_spec("sampler.seed=7"), "host/a")) == a


@pytest.mark.parametrize(
    "name, option",
    [
        ("median", "n_warmup_steps"),
        ("hyperband", "min_resource"),
        ("successive_halving", "min_resource"),
    ],
)
def test_no_trial_is_pruned_on_its_first_epoch_unless_the_spec_says_so(name, option, tmp_path):
    """Epoch 1 of a warm-up ranks configurations badly (4 of 5 pruned there on real posts): the
    first rung is epoch 2 by default, and a spec's own option still wins."""
    from hpo.spec import load_spec
    from hpo.study.search import make_pruner

    smoke = REPO / "studies" / "criteria-smoke.yaml"
    default = make_pruner(
        load_spec(smoke, [f"pruner={{name: {name}, options: {{}}}}"], "sqlite://", env={})
    )
    told = make_pruner(
        load_spec(
            smoke, [f"pruner={{name: {name}, options: {{{option}: 1}}}}"], "sqlite://", env={}
        )
    )
    attribute = {"n_warmup_steps": "_n_warmup_steps", "min_resource": "_min_resource"}[option]
    assert getattr(default, attribute) == 2 and getattr(told, attribute) == 1


def test_auto_takes_tpe_options_and_names_a_wrong_one():
    spec = auto_spec(sampler={"name": "auto", "options": {"multivariate": True, "group": True}})
    assert isinstance(make_sampler(spec), StagedSampler)
    with pytest.raises(SpecError, match=r"sampler\.options\.n_startup_trials: expected an int"):
        make_sampler(auto_spec(sampler={"name": "auto", "options": {"n_startup_trials": "ten"}}))


@pytest.mark.parametrize(
    ("pruner", "first_look"),
    [
        ("{name: hyperband}", 2),  # the default first rung: epoch 2
        ("{name: successive_halving, units_per_epoch: 3, options: {min_resource: 1}}", 1 / 3),
        ("{name: median}", None),  # waits for finished trials, no rung
        ("{name: none}", None),
    ],
)
def test_the_first_judgement_is_the_pruners_first_rung_in_epochs(pruner, first_look):
    from hpo.study.search import first_look_epochs

    spec = load_spec(
        str(REPO / "studies" / "evidence-smoke.yaml"), ["train.epochs=4", f"pruner={pruner}"]
    )
    assert first_look_epochs(spec) == first_look
