"""Preflight's search-space checks against each encoder's config: every value a trial of an
encoder can get is judged, and only those (a parameter conditioned on another encoder is not)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from hpo.errors import DataError, UsageError
from hpo.fixtures import make_tiny_encoder
from hpo.run.preflight import _check_search_fits, _train_config, preflight, sampled_configs
from hpo.spec import load_spec
from tests.support.damaged_encoders import (
    misshapen,
    state_dict_prefixed,
    truncated,
    without_layer,
)


@pytest.fixture(scope="module")
def deep_roberta(tmp_path_factory):
    return make_tiny_encoder("roberta", tmp_path_factory.mktemp("deep"), layers=4)


def _study(tmp_path, train: dict, search_space: dict, **more):
    """A two-trial criteria spec of ``train`` and ``search_space`` (and ``more`` top-level
    fields), loaded."""
    document = {"name": "preflight", "task": "criteria", "data_dir": "unused", "n_trials": 2}
    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump({**document, "train": train, "search_space": search_space, **more})
    )
    return load_spec(path, env={})


def _spec(tmp_path, freeze_layers: dict, train: dict | None = None):
    encoders = {"type": "categorical", "choices": ["shallow", "deep"]}
    return _study(tmp_path, train or {}, {"encoder": encoders, "freeze_layers": freeze_layers})


def test_a_parameter_conditioned_on_one_encoder_is_judged_against_that_encoder_only(
    tmp_path, tiny_roberta, deep_roberta
):
    spec = _spec(tmp_path, {"type": "int", "low": 0, "high": 4, "when": {"encoder": "deep"}})
    _check_search_fits(spec, "deep", str(deep_roberta))  # 4 layers: fits
    _check_search_fits(spec, "shallow", str(tiny_roberta))  # never gets freeze_layers > 0


def test_every_encoder_the_search_can_choose_is_judged(tmp_path, tiny_roberta, deep_roberta):
    spec = _spec(tmp_path, {"type": "int", "low": 0, "high": 4})
    _check_search_fits(spec, "deep", str(deep_roberta))
    with pytest.raises(UsageError) as caught:
        _check_search_fits(spec, "shallow", str(tiny_roberta))
    assert str(caught.value) == (
        "search_space.freeze_layers: freeze_layers=4 but encoder 'shallow' has 2 layers; "
        "use at most 2 for it"
    )


def test_an_unsampled_conditional_parameter_keeps_the_default_which_is_judged_too(
    tmp_path, tiny_roberta
):
    """max_length searched only under a condition: a trial where it is not sampled trains at
    the TrainConfig default (256), which must fit as well."""
    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "preflight",
                "task": "criteria",
                "data_dir": "unused",
                "n_trials": 2,
                "train": {"encoder": "shallow"},
                "search_space": {
                    "long_text": {"type": "categorical", "choices": ["truncate", "chunks"]},
                    "max_length": {
                        "type": "int",
                        "low": 64,
                        "high": 128,
                        "when": {"long_text": "chunks"},
                    },
                },
            }
        )
    )
    spec = load_spec(path, env={})
    _check_search_fits(spec, "shallow", str(tiny_roberta))  # 256 <= 512
    small = make_tiny_encoder("roberta", tmp_path / "small", max_positions=130)  # 128 positions
    with pytest.raises(UsageError, match="max_length=256 but encoder 'shallow' has 128 positions"):
        _check_search_fits(spec, "shallow", str(small))


def test_a_sampled_point_breaking_a_rule_across_settings_is_named_on_one_line(tmp_path):
    # every value passes beside the others' first ones, and every two choices together (the
    # spec's checks), batch 8 with micro-batch 16 does not: only a sampled point meets it
    searched = {
        "batch_size": {"type": "categorical", "choices": [16, 8]},
        "micro_batch_size": {"type": "int", "low": 4, "high": 16},
    }
    spec = _study(tmp_path, {"encoder": "x"}, searched)
    with pytest.raises(UsageError) as caught:
        _train_config(spec, {"batch_size": 8, "micro_batch_size": 16}, "sampled")
    assert str(caught.value).endswith(
        "is not a valid training setting: micro_batch_size: must be at most batch_size (8), "
        "got 16; lower it or leave it out"
    )
    assert "\n" not in str(caught.value)


def test_the_warm_start_is_checked_as_a_training_setting_before_the_study_exists(tmp_path):
    """The dry run queues the warm start first, as the study does: a warm start that the
    search space accepts but training refuses is named before any trial runs."""
    searched = {
        "batch_size": {"type": "categorical", "choices": [16, 8]},
        "micro_batch_size": {"type": "int", "low": 4, "high": 16},
    }
    warm = [{"batch_size": 8, "micro_batch_size": 16}]
    spec = _study(tmp_path, {"encoder": "x"}, searched, warm_start=warm)
    with pytest.raises(UsageError, match=r"the warm start point \{'batch_size': 8, 'micro_"):
        sampled_configs(spec)
    # a valid one is the first configuration, as it is the study's first trial
    searched = {"learning_rate": {"type": "float", "low": 1.0e-5, "high": 1.0e-3, "log": True}}
    spec = _study(tmp_path, {"encoder": "x"}, searched, warm_start=[{"learning_rate": 3.0e-4}])
    configs = sampled_configs(spec)
    assert configs[0].learning_rate == 3.0e-4
    assert all(config.learning_rate != 3.0e-4 for config in configs[1:])
    assert len(configs) == 1 + 3  # and the sampler's own draws


_IMPORTED = (  # a run's preflight, then the heavy libraries it imported, on the last line
    "import sys; from hpo.run.preflight import preflight; from hpo.spec import load_spec; "
    "print(preflight(load_spec(sys.argv[1], sys.argv[2:]), notes=False)); "
    "print(sorted({'torch', 'transformers', 'sklearn'} & set(sys.modules)))"
)


def test_a_runs_preflight_passed_on_the_same_inputs_is_not_repeated_and_a_change_redoes_it(
    tmp_path, tiny_roberta, tiny_deberta, sqlite_url
):
    """The start of `hpo tune`: a receipt of a passed preflight lets the same inputs skip the
    checks that import torch, transformers and scikit-learn; a changed encoder is checked
    again and refused."""
    import shutil
    import subprocess
    import sys

    from tests.support.tune_cli import REPO, study_sets, tune_assets

    assets = tune_assets(tmp_path, tiny_roberta, tiny_deberta, posts=30)
    roberta = shutil.copytree(tiny_roberta, tmp_path / "roberta")  # this test's own to change
    assets["roberta"] = roberta
    sets = [*study_sets("receipt", assets), f"storage={sqlite_url}"]
    argv = [sys.executable, "-c", _IMPORTED, str(REPO / "studies" / "criteria-smoke.yaml"), *sets]

    def start() -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)

    first, again = start(), start()
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    assert first.stdout.splitlines()[-1] == "['sklearn', 'torch', 'transformers']"
    assert again.stdout.splitlines() == ["[]", "[]"], "the same inputs: nothing heavy imported"
    assert len(list((tmp_path / "cache" / "preflight").glob("*.passed"))) == 1

    config = roberta / "config.json"
    text = config.read_text()
    config.write_text(
        text.replace('"max_position_embeddings": 514', '"max_position_embeddings": 66')
    )
    changed = start()
    assert changed.returncode != 0
    assert "train.max_length: max_length=96 but encoder 'tiny-roberta' has 64 positions" in (
        changed.stderr
    ), changed.stderr[-2000:]


def test_a_same_size_edit_of_the_data_with_its_mtime_set_back_is_checked_again(
    tmp_path, tiny_roberta, tiny_deberta, sqlite_url, monkeypatch
):
    """Issue #48, item 17: one label renamed in place, the file's size and mtime as before."""
    from tests.support.tune_cli import REPO, study_sets, tune_assets

    assets = tune_assets(tmp_path, tiny_roberta, tiny_deberta, posts=30)
    spec = load_spec(
        REPO / "studies" / "criteria-smoke.yaml",
        [*study_sets("receipt", assets), f"storage={sqlite_url}"],
    )
    monkeypatch.chdir(tmp_path)
    preflight(spec, notes=False)
    assert preflight(spec, notes=False) == [], "passed on these inputs: the receipt skips it"
    annotations = assets["data"] / "redsm5_annotations.csv"
    before, text = annotations.stat(), annotations.read_text()
    assert ",COGNITIVE_ISSUES," in text
    annotations.write_text(text.replace(",COGNITIVE_ISSUES,", ",COGNITIVE_ISSUEX,"))
    os.utime(annotations, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert annotations.stat().st_size == before.st_size
    with pytest.raises(DataError, match="COGNITIVE_ISSUEX"):
        preflight(spec, notes=False)


def test_the_checks_before_a_study_never_import_transformers_model_classes():
    """What preflight imports (the data, the formulations it looks up, the device and tokenizer
    checks) stays clear of transformers' model classes, ~2 s per `hpo tune` and `hpo validate`:
    only the check of each encoder's weights loads them, once its cheaper checks passed
    (whole_post's post step imports them only when it trains)."""
    code = (
        "import sys, hpo.run.preflight, hpo.data, hpo.train.formulations, hpo.models.hardware, "
        "hpo.models.tokenizer, hpo.models.limits\n"
        "from transformers import AutoConfig\n"
        "print('transformers.modeling_utils' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize(
    "damage, said",
    [
        (without_layer, "16 encoder weight(s) are not in its checkpoint (encoder.layer.1."),
        (state_dict_prefixed, "encoder weight(s) are not in its checkpoint (embeddings."),
        (misshapen, "1 weight(s) in its checkpoint do not fit its config.json"),
        (truncated, "cannot load its weights from"),
    ],
)
def test_an_encoder_checkpoint_that_would_not_load_whole_is_refused_before_any_study(
    tmp_path, tiny_roberta, tiny_deberta, capsys, damage, said
):
    """Weights missing from a checkpoint started from random values with only a warning line,
    and the study ran to the end; a truncated or misshapen one failed five trials first."""
    from hpo.cli import main
    from tests.support.tune_cli import REPO, study_sets, tune_assets

    assets = tune_assets(tmp_path, tiny_roberta, tiny_deberta, posts=30)
    assets["roberta"] = damage(tiny_roberta, tmp_path / "damaged")
    database = tmp_path / "hpo.db"
    sets = [f"--set={s}" for s in study_sets("damaged", assets)]
    spec = str(REPO / "studies" / "criteria-smoke.yaml")
    for command in ("validate", "tune"):
        code = main(
            [command, spec, *sets, "--storage", f"sqlite:///{database}", "--no-progress"]
            if command == "tune"
            else [command, spec, *sets, "--storage", f"sqlite:///{database}"]
        )
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert err.startswith("hpo: error: encoder 'tiny-roberta': ") and said in err, err
        assert not database.exists(), "no study"
