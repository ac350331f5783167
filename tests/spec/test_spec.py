"""Study files: every shipped one validates, and every broken one fails on one line naming the
key."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from hpo.spec import (
    DEFAULT_STORAGE,
    CategoricalParam,
    PatientOptions,
    SpecError,
    StudySpec,
    load_spec,
    parse_override,
)
from hpo.train.config import TrainConfig
from tests.support import REPO

STUDIES = sorted((REPO / "studies").glob("*.yaml"))

BASE = {
    "name": "unit-spec",
    "task": "criteria",
    "data_dir": "_runs/sample-data",
    "n_trials": 6,
    "storage": "sqlite:///from-file.db",
    "sampler": {"name": "tpe", "seed": 0, "options": {"n_startup_trials": 3}},
    "pruner": {"name": "median", "options": {}},
    "model_paths": {"tiny-roberta": "/models/tiny-roberta"},
    "train": {"epochs": 3, "max_length": 128},
    "search_space": {
        "encoder": {"type": "categorical", "choices": ["tiny-roberta", "org/hub-model"]},
        "learning_rate": {"type": "float", "low": 1.0e-4, "high": 3.0e-3, "log": True},
        "head_layers": {"type": "int", "low": 0, "high": 1},
        "pooling": {"type": "categorical", "choices": ["cls", "mean"]},
    },
}


def first_values(spec: StudySpec, given: dict[str, object] | None = None) -> dict[str, object]:
    """Each applicable parameter's ``given`` value, else its first choice or low end; parents
    before children, as sampling goes."""
    given = given or {}
    values: dict[str, object] = {}
    for name, param in spec.search_space.items():
        if spec.applies(name, values):
            first = param.choices[0] if isinstance(param, CategoricalParam) else param.low
            values[name] = given.get(name, first)
    return values


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def changed(*edits: tuple[str, object]) -> dict:
    """BASE with each (dotted key, value) set; a value of ``DELETE`` removes the key."""
    document = copy.deepcopy(BASE)
    for dotted, value in edits:
        *parents, last = dotted.split(".")
        node = document
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return document


DELETE = object()


def test_every_shipped_study_validates_and_builds_a_train_config():
    assert len(STUDIES) >= 4
    for path in STUDIES:
        spec = load_spec(path, env={})
        assert spec.name == path.stem
        assert isinstance(spec.train_config(first_values(spec), None), TrainConfig)


def test_the_supermax_studies_search_in_parallel_aware_conditional_warm_started_spaces():
    for path in STUDIES:
        spec = load_spec(path, env={})
        if not spec.name.endswith("-supermax"):
            continue
        assert spec.sampler.name == "auto"  # TPE (these options) once the budget allows
        assert spec.sampler.options == {"multivariate": True, "group": True, "constant_liar": True}
        assert spec.search_space["lora_r"].when == {"adapter": ("lora",)}
        assert spec.search_space["head_hidden_size"].when == {"head_layers": (1, 2)}
        assert {point["encoder"] for point in spec.warm_start} == set(
            spec.search_space["encoder"].choices
        )
        for point in spec.warm_start:
            config = spec.train_config(first_values(spec, given=spec.typed_point(point)), None)
            assert (
                config.learning_rate in (2e-5, 3e-5)
                and config.epochs == 3
                and config.weight_decay == 0.01
            )


def test_hyperband_resource_covers_every_searched_epoch_count():
    for path in STUDIES:
        spec = load_spec(path, env={})
        if spec.pruner.name == "hyperband":
            assert spec.pruner.options["max_resource"] == spec.search_space["epochs"].high


BROKEN = {
    "unknown top-level key": (changed(("epochz", 3)), "epochz", "not allowed"),
    "unknown distribution key": (
        changed(("search_space.learning_rate.scale", 2)),
        "search_space.learning_rate.scale",
        "not allowed",
    ),
    "low above high": (
        changed(("search_space.learning_rate.low", 1.0e-2)),
        "search_space.learning_rate.low",
        "less than high",
    ),
    "low equals high": (
        changed(("search_space.head_layers.high", 0)),
        "search_space.head_layers.low",
        "use a fixed train setting",
    ),
    "log from zero": (
        changed(("search_space.learning_rate.low", 0.0)),
        "search_space.learning_rate.low",
        "log",
    ),
    "step with log": (
        changed(("search_space.learning_rate.step", 1.0e-4)),
        "search_space.learning_rate.step",
        "log",
    ),
    "fractional int": (
        changed(("search_space.head_layers.low", 0.5)),
        "search_space.head_layers.low",
        "integer",
    ),
    "missing type": (
        changed(("search_space.learning_rate.type", DELETE)),
        "search_space.learning_rate",
        "type",
    ),
    "empty choices": (
        changed(("search_space.pooling.choices", [])),
        "search_space.pooling.choices",
        "at least one",
    ),
    "duplicate choices": (
        changed(("search_space.pooling.choices", ["cls", "cls"])),
        "search_space.pooling.choices",
        "duplicate",
    ),
    "non-scalar choice": (
        changed(("search_space.pooling.choices", [["cls"]])),
        "search_space.pooling.choices.0",
        "string, number",
    ),
    "unknown parameter": (
        changed(
            ("search_space.lerning_rate", BASE["search_space"]["learning_rate"]),
            ("search_space.learning_rate", DELETE),
        ),
        "search_space.lerning_rate",
        "did you mean 'learning_rate'",
    ),
    "fixed and searched": (
        changed(("train.head_layers", 1)),
        "search_space.head_layers",
        "also fixed",
    ),
    "float on an integer setting": (
        changed(("search_space.batch_size", {"type": "float", "low": 8, "high": 32})),
        "search_space.batch_size.type",
        "int",
    ),
    "searched value out of range": (
        changed(("search_space.head_layers.high", 5)),
        "search_space.head_layers",
        "head_layers=5 is invalid",
    ),
    "top-level field in train": (
        changed(("train.objective_metric", "f1")),
        "train.objective_metric",
        "'metric'",
    ),
    "unknown train key": (changed(("train.epoch", 2)), "train.epoch", "did you mean 'epochs'"),
    "refit setting in a search": (
        changed(("train.train_on", "train+validation")),
        "train.train_on",
        "hpo finalize --refit train+val",
    ),
    "train wrong type": (changed(("train.epochs", "two")), "train.epochs", "integer"),
    "train bad value": (changed(("train.epochs", 0)), "train.epochs", "greater than 0 (got 0)"),
    "train value across fields": (
        changed(("train.batch_size", 8), ("train.micro_batch_size", 16)),
        "train.micro_batch_size",
        "must be at most batch_size (8), got 16",
    ),
    "train unknown choice": (
        changed(("train.head_activation", "swish")),
        "train.head_activation",
        "'gelu', 'relu', 'tanh' or 'silu' (got 'swish')",
    ),
    "unknown task": (changed(("task", "sentiment")), "task", "'criteria' or 'evidence'"),
    "unknown sampler": (changed(("sampler.name", "bayes")), "sampler.name", "'tpe'"),
    "unknown pruner": (changed(("pruner.name", "asha")), "pruner.name", "'median'"),
    "patient without patience": (
        changed(("pruner", {"name": "patient", "options": {}})),
        "pruner.options.patience",
        "required",
    ),
    "patient wrapping a typo": (
        changed(
            (
                "pruner",
                {"name": "patient", "options": {"patience": 1, "wrapped": {"nme": "median"}}},
            )
        ),
        "pruner.options.wrapped.nme",
        "not allowed",
    ),
    "bad name": (changed(("name", "my study!")), "name", "pattern"),
    "name of two dots": (changed(("name", "..")), "name", "must start with a letter or digit"),
    "name of one dot": (changed(("name", ".")), "name", "must start with a letter or digit"),
    "name starting with a dot": (
        changed(("name", ".hidden")),
        "name",
        "must start with a letter or digit",
    ),
    "no trials": (changed(("n_trials", 0)), "n_trials", "greater than or equal to 1"),
    # issue #48, item 19: past any budget
    "trials past any budget": (
        changed(("n_trials", 10**20)),
        "n_trials",
        "less than or equal to 100000 (got 100000000000000000000)",
    ),
    "epochs past any training": (
        changed(("train.epochs", 10**9)),
        "train.epochs",
        "must be at most 1000 (got 1000000000)",
    ),
    "searched epochs past any training": (
        changed(
            ("train", {"max_length": 128}),
            ("search_space.epochs", {"type": "int", "low": 1, "high": 10**9}),
        ),
        "search_space.epochs",
        "epochs=1000000000 is invalid: must be at most 1000 (got 1000000000)",
    ),
    # issue #55: inf or 1e308 trains a NaN model that used to become the study's best
    "infinite learning_rate": (
        changed(("search_space.learning_rate", DELETE), ("train.learning_rate", float("inf"))),
        "train.learning_rate",
        "finite number",
    ),
    "learning_rate of 1e308": (
        changed(("search_space.learning_rate", DELETE), ("train.learning_rate", 1e308)),
        "train.learning_rate",
        "less than or equal to 1 (got 1e+308)",
    ),
    "searched learning_rate up to 1e308": (
        changed(("search_space.learning_rate.high", 1e308)),
        "search_space.learning_rate",
        "learning_rate=1e+308 is invalid: Input should be less than or equal to 1",
    ),
    "infinite evidence_loss_weight": (
        changed(("train.evidence_loss_weight", float("inf"))),
        "train.evidence_loss_weight",
        "finite number",
    ),
    "evidence_loss_weight of 1e308": (
        changed(("train.evidence_loss_weight", 1e308)),
        "train.evidence_loss_weight",
        "less than or equal to 10 (got 1e+308)",
    ),
    "infinite head_learning_rate": (
        changed(("train.head_learning_rate", float("inf"))),
        "train.head_learning_rate",
        "finite number",
    ),
    "infinite weight_decay": (
        changed(("train.weight_decay", float("inf"))),
        "train.weight_decay",
        "finite number",
    ),
    "negative weight_decay": (
        changed(("train.weight_decay", -0.1)),
        "train.weight_decay",
        "greater than or equal to 0",
    ),
    "infinite max_grad_norm": (
        changed(("train.max_grad_norm", float("inf"))),
        "train.max_grad_norm",
        "finite number",
    ),
    "infinite focal_gamma": (
        changed(("train.focal_gamma", float("inf"))),
        "train.focal_gamma",
        "finite number",
    ),
    "negative keep_top_k": (
        changed(("keep_top_k", -1)),
        "keep_top_k",
        "greater than or equal to 0",
    ),
    "zero timeout": (changed(("timeout_per_trial", 0)), "timeout_per_trial", "greater than 0"),
    "post metric on evidence": (
        changed(("task", "evidence"), ("metric", "post_micro_f1")),
        "metric",
        "only for task criteria",
    ),
    "prune_on a post metric on evidence": (
        changed(("task", "evidence"), ("metric", "macro_f1"), ("prune_on", "post_macro_f1")),
        "prune_on",
        "only for task criteria",
    ),
    "prune_on a ranking metric on criteria": (
        changed(("prune_on", "recall_at_3")),
        "prune_on",
        "only for task evidence",
    ),
    "prune_on when minimizing": (
        changed(("direction", "minimize"), ("prune_on", "auroc")),
        "prune_on",
        "needs direction: maximize",
    ),
    "prune_on an unknown metric": (changed(("prune_on", "loss")), "prune_on", "average_precision"),
    "no encoder": (changed(("search_space.encoder", DELETE)), "train.encoder", "required"),
    "nothing searched": (
        changed(("search_space", {}), ("train.encoder", "x")),
        "search_space",
        "at least 1",
    ),
    "condition on an unknown parameter": (
        changed(("search_space.pooling.when", {"head_layer": 1})),
        "search_space.pooling.when.head_layer",
        "did you mean 'head_layers'",
    ),
    "condition on a fixed setting": (
        changed(("search_space.pooling.when", {"epochs": 3})),
        "search_space.pooling.when.epochs",
        "fixed in train",
    ),
    "condition on a later parameter": (
        changed(("search_space.learning_rate.when", {"pooling": "cls"})),
        "search_space.learning_rate.when.pooling",
        "list pooling first",
    ),
    "condition on a float": (
        changed(("search_space.pooling.when", {"learning_rate": 1.0e-3})),
        "search_space.pooling.when.learning_rate",
        "categorical or int",
    ),
    "condition value not a choice": (
        changed(("search_space.head_layers.when", {"encoder": "roberta"})),
        "search_space.head_layers.when.encoder",
        "not one of encoder's choices",
    ),
    "condition value out of range": (
        changed(("search_space.pooling.when", {"head_layers": [1, 3]})),
        "search_space.pooling.when.head_layers",
        "outside its range",
    ),
    "condition cycle": (
        changed(
            ("search_space.head_layers.when", {"pooling": "cls"}),
            ("search_space.pooling.when", {"head_layers": 1}),
        ),
        "search_space.head_layers.when.pooling",
        "cycle head_layers -> pooling -> head_layers",
    ),
    "condition on itself": (
        changed(("search_space.pooling.when", {"pooling": "cls"})),
        "search_space.pooling.when.pooling",
        "cycle pooling -> pooling",
    ),
    "empty condition": (
        changed(("search_space.pooling.when", {})),
        "search_space.pooling.when",
        "at least one",
    ),
    "empty list of condition values": (
        changed(("search_space.pooling.when", {"head_layers": []})),
        "search_space.pooling.when.head_layers",
        "non-empty list",
    ),
    "warm start of an unknown name": (
        changed(("warm_start", [{"lerning_rate": 1.0e-3}])),
        "warm_start.0.lerning_rate",
        "did you mean 'learning_rate'",
    ),
    "warm start out of range": (
        changed(("warm_start", [{"pooling": "cls"}, {"learning_rate": 1.0}])),
        "warm_start.1.learning_rate",
        "outside its range",
    ),
    "warm start not a choice": (
        changed(("warm_start", [{"pooling": "max"}])),
        "warm_start.0.pooling",
        "not one of",
    ),
    "warm start fractional int": (
        changed(("warm_start", [{"head_layers": 0.5}])),
        "warm_start.0.head_layers",
        "not an integer",
    ),
    "warm start child without its parent": (
        changed(
            ("search_space.pooling.when", {"head_layers": 1}), ("warm_start", [{"pooling": "mean"}])
        ),
        "warm_start.0.pooling",
        "applies only when head_layers is 1",
    ),
    "warm start that is not a mapping": (
        changed(("warm_start", [3])),
        "warm_start.0",
        "dictionary",
    ),
    # YAML reads yes/no/on/off as booleans, and pydantic's lax mode reads true as 1 (#34 item 13)
    **{
        f"boolean {path}{list(value) if isinstance(value, dict) else ''}": (
            changed((path, value)),
            ".".join([path, *value]) if isinstance(value, dict) else path,
            "must be a number, not a boolean",
        )
        for path, value in [
            ("n_trials", True),
            ("keep_top_k", False),
            ("timeout_per_trial", True),
            ("heartbeat", {"interval": True}),
            ("heartbeat", {"max_retry": False}),
            ("sampler.seed", True),
            ("search_space.head_layers.high", True),
            ("search_space.learning_rate.low", True),
            ("train.epochs", True),
            ("train.batch_size", True),
            ("train.warmup_ratio", True),
            ("train.micro_batch_tokens", False),
        ]
    },
    "boolean choice of an integer setting": (
        changed(("search_space.head_layers", {"type": "categorical", "choices": [0, True]})),
        "search_space.head_layers.choices.1",
        "must be a number, not a boolean",
    ),
    "study name past a file name's length": (
        changed(("name", "a" * 250)),
        "name",
        "is 250 characters long; give at most 128",
    ),
}


WHOLE_POST = {
    "type": "categorical",
    "choices": ["multilabel", "whole_post"],
}
BROKEN["a setting whole_post does not take, searched for it too"] = (
    changed(
        ("search_space.criteria_formulation", WHOLE_POST),
        ("search_space.long_text", {"type": "categorical", "choices": ["truncate", "head_tail"]}),
    ),
    "search_space.long_text",
    "whole_post reads every sentence, so head_tail does not apply",
)


def test_every_choice_is_probed_where_its_conditions_sample_it(tmp_path):
    """whole_post beside a long_text searched only for multilabel: each is checked at a point
    where it is sampled, not beside a setting it never meets."""
    document = changed(
        ("search_space.criteria_formulation", {**WHOLE_POST, "choices": ["whole_post", "pairs"]}),
        (
            "search_space.long_text",
            {"type": "categorical", "choices": ["head_tail", "chunks"],
             "when": {"criteria_formulation": "pairs"}},
        ),
    )  # fmt: skip
    spec = load_spec(write(tmp_path, document), env={})
    assert spec.search_space["long_text"].when == {"criteria_formulation": ("pairs",)}


@pytest.mark.parametrize("document, path, problem", BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_spec_fails_on_one_line_naming_the_key(tmp_path, document, path, problem):
    study = write(tmp_path, document)
    with pytest.raises(SpecError) as caught:
        load_spec(study, env={})
    message = str(caught.value)
    assert message.startswith(f"{study}: ")
    assert f" {path}:" in message and problem in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "text, problem",
    [
        ("name: x\ntask: criteria\nsearch_space: {lr: [1,\n", "line 4"),
        ("- name: x\n- task: criteria\n", "not a list"),
        ("", "not an empty file"),
    ],
    ids=["malformed YAML", "top-level list", "empty file"],
)
def test_an_unreadable_document_fails_naming_where(tmp_path, text, problem):
    study = tmp_path / "study.yaml"
    study.write_text(text)
    with pytest.raises(SpecError, match=problem):
        load_spec(study, env={})


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(SpecError, match="missing.yaml: no such study file"):
        load_spec(tmp_path / "missing.yaml", env={})


def test_overrides_are_applied_and_validated(tmp_path):
    study = write(tmp_path, BASE)
    spec = load_spec(
        study,
        [
            "n_trials=3",
            "train.epochs=1",
            "model_paths.tiny-roberta=/x",
            "sampler.seed=7",
            "search_space.learning_rate.high=1e-2",
            "keep_top_k=0",
        ],
        env={},
    )
    assert (spec.n_trials, spec.train["epochs"], spec.sampler.seed, spec.keep_top_k) == (3, 1, 7, 0)
    assert spec.model_paths["tiny-roberta"] == "/x"
    assert spec.search_space["learning_rate"].high == 1.0e-2


def test_overrides_create_missing_mappings(tmp_path):
    study = write(tmp_path, changed(("train", None)))
    assert load_spec(study, ["train.epochs=2"], env={}).train == {"epochs": 2}


@pytest.mark.parametrize(
    "override, problem",
    [
        ("n_trials=0", "n_trials: Input should be greater than or equal to 1"),
        ("n_trials=true", "n_trials: must be a number, not a boolean"),
        ("n_trials=yes", "n_trials: must be a number, not a boolean"),
        ("nonsense", "expected the form key=value"),
        ("=3", "expected the form key=value"),
        ("train..epochs=3", "expected the form key=value"),
        ("n_trials.max=3", "n_trials: is not a mapping"),
        ("train.epochs=[1,", "not valid YAML"),
    ],
)
def test_a_bad_override_fails(tmp_path, override, problem):
    with pytest.raises(SpecError, match=problem):
        load_spec(write(tmp_path, BASE), [override], env={})


def test_parse_override_reads_values_as_yaml():
    assert parse_override("train.epochs=2") == (["train", "epochs"], 2)
    assert parse_override("storage=postgresql://u@h/db?x=1") == (
        ["storage"],
        "postgresql://u@h/db?x=1",
    )
    assert parse_override("search_space.learning_rate.low=1e-5") == (
        ["search_space", "learning_rate", "low"],
        1e-5,
    )
    assert parse_override("sampler.seed=") == (["sampler", "seed"], None)


@pytest.mark.parametrize(
    "argument, env, expected",
    [
        ("sqlite:///argument.db", {"HPO_STORAGE": "sqlite:///env.db"}, "sqlite:///argument.db"),
        (None, {"HPO_STORAGE": "sqlite:///env.db"}, "sqlite:///env.db"),
        (None, {}, "sqlite:///from-file.db"),
    ],
)
def test_storage_precedence(tmp_path, argument, env, expected):
    assert load_spec(write(tmp_path, BASE), storage=argument, env=env).storage.text == expected


def test_storage_defaults_when_nothing_names_one(tmp_path):
    assert (
        load_spec(write(tmp_path, changed(("storage", None))), env={}).storage.text
        == DEFAULT_STORAGE
    )


def test_the_storage_is_one_value_that_never_prints_its_password(tmp_path):
    spec = load_spec(write(tmp_path, BASE), storage="postgresql://hpo:s3cret@db/hpo", env={})
    assert spec.storage.is_shared and spec.storage.text == "postgresql://hpo:s3cret@db/hpo"
    assert "s3cret" not in f"{spec.storage} {spec!r} {spec.model_dump_json()}"
    for wrong in ("storage=5", "storage=[sqlite:///a.db]"):
        with pytest.raises(SpecError, match="storage: must be a URL such as sqlite:///PATH"):
            load_spec(write(tmp_path, BASE), overrides=[wrong], env={})


def test_train_config_maps_encoder_names_to_local_paths(tmp_path):
    spec = load_spec(write(tmp_path, BASE), env={})
    params = first_values(spec)
    config = spec.train_config(params, "trial_0")
    assert (config.encoder, config.epochs, config.max_length) == ("/models/tiny-roberta", 3, 128)
    assert (config.task, config.data_dir, config.objective_metric, config.checkpoint_dir) == (
        "criteria",
        "_runs/sample-data",
        "macro_f1",
        "trial_0",
    )
    assert (
        spec.train_config({**params, "encoder": "org/hub-model"}, None).encoder == "org/hub-model"
    )
    with pytest.raises(ValueError, match="do not match the search space"):
        spec.train_config({"learning_rate": 1e-3}, None)


def test_exponent_numbers_yaml_reads_as_strings_are_floats(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(
        yaml.safe_dump(
            changed(("search_space.weight_decay", {"type": "categorical", "choices": [0.0, 0.01]}))
        )
        .replace("0.0001", "1e-4")
        .replace("0.01", "1e-2")
    )
    assert "low: 1e-4" in study.read_text()  # the string PyYAML does not read as a number
    spec = load_spec(study, env={})
    assert spec.search_space["learning_rate"].low == 1e-4
    assert spec.search_space["weight_decay"].choices == (0.0, 1e-2)


def test_a_patient_pruner_wraps_another(tmp_path):
    study = write(
        tmp_path,
        changed(
            (
                "pruner",
                {
                    "name": "patient",
                    "options": {
                        "patience": 2,
                        "wrapped": {"name": "hyperband", "options": {"reduction_factor": 3}},
                    },
                },
            )
        ),
    )
    options = load_spec(study, env={}).pruner.patient_options()
    assert isinstance(options, PatientOptions)
    assert (options.patience, options.wrapped.name, options.wrapped.options) == (
        2,
        "hyperband",
        {"reduction_factor": 3},
    )


def test_a_loaded_spec_is_frozen_and_knows_its_file(tmp_path):
    study = write(tmp_path, BASE)
    spec = load_spec(study, env={})
    assert spec.source == str(study)
    assert spec.study_dir("0123456789abcdef") == Path("_runs/studies/unit-spec-01234567")
    with pytest.raises(ValidationError):
        spec.n_trials = 1


def test_a_key_written_twice_is_an_error_naming_it_and_its_line(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text((REPO / "studies" / "criteria-smoke.yaml").read_text() + "n_trials: 99\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert "duplicate key 'n_trials'" in message and "line " in message and "\n" not in message


def test_a_study_file_that_is_not_utf8_is_a_one_line_error(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(SpecError, match="not valid UTF-8; save the study file as UTF-8"):
        load_spec(path)


def conditional_spec(tmp_path: Path) -> StudySpec:
    path = tmp_path / "study.yaml"  # in this key order: a condition names an earlier parameter
    path.write_text(
        yaml.safe_dump(
            changed(
                ("search_space.adapter", {"type": "categorical", "choices": ["full", "lora"]}),
                (
                    "search_space.lora_r",
                    {"type": "int", "low": 4, "high": 16, "when": {"adapter": "lora"}},
                ),
                (
                    "search_space.head_hidden_size",
                    {"type": "categorical", "choices": [32, 64], "when": {"head_layers": [1]}},
                ),
                ("warm_start", [{"adapter": "full", "learning_rate": "2e-4", "head_layers": 0}]),
            ),
            sort_keys=False,
        )
    )
    return load_spec(path, env={})


def test_a_condition_decides_which_parameters_apply(tmp_path):
    spec = conditional_spec(tmp_path)
    assert spec.search_space["lora_r"].when == {"adapter": ("lora",)}
    assert spec.applies("lora_r", {"adapter": "lora"}) and not spec.applies(
        "lora_r", {"adapter": "full"}
    )
    # a parent that was not sampled fails its children's conditions
    assert not spec.applies("lora_r", {})
    assert spec.search_space["head_hidden_size"].condition_text() == "head_layers is 1"


def test_an_unsampled_conditional_parameter_keeps_the_train_config_default(tmp_path):
    spec = conditional_spec(tmp_path)
    base = {"encoder": "tiny-roberta", "learning_rate": 1e-3, "pooling": "cls"}
    config = spec.train_config({**base, "head_layers": 0, "adapter": "full"}, None)
    assert (
        config.lora_r == TrainConfig.lora_r
        and config.head_hidden_size == TrainConfig.head_hidden_size
    )
    config = spec.train_config(
        {**base, "head_layers": 1, "head_hidden_size": 32, "adapter": "lora", "lora_r": 8}, None
    )
    assert (config.lora_r, config.head_hidden_size) == (8, 32)
    with pytest.raises(
        ValueError, match="applicable"
    ):  # a child given although its condition fails
        spec.train_config({**base, "head_layers": 0, "adapter": "full", "lora_r": 8}, None)


def test_warm_start_points_are_typed_as_the_search_space_takes_them(tmp_path):
    spec = conditional_spec(tmp_path)
    typed = spec.typed_point(spec.warm_start[0])
    assert typed == {"adapter": "full", "learning_rate": 2e-4, "head_layers": 0}
    assert isinstance(typed["learning_rate"], float)


MISSPELT = {
    "top level": (("n_trial", 3), "n_trial", "n_trials"),
    "a section": (("sampler.sed", 1), "sampler.sed", "seed"),
    "a searched parameter": (
        ("search_space.learning_rate.hgih", 1.0),
        "search_space.learning_rate.hgih",
        "high",
    ),
    "heartbeat": (("heartbeat", {"intervl": 30}), "heartbeat.intervl", "interval"),
}


@pytest.mark.parametrize("edit, path, meant", MISSPELT.values(), ids=MISSPELT.keys())
def test_a_misspelt_key_names_the_key_it_was_meant_to_be(tmp_path, edit, path, meant):
    study = write(tmp_path, changed(edit))
    with pytest.raises(SpecError) as caught:
        load_spec(study, env={})
    message = str(caught.value)
    assert f" {path}: unknown key, not allowed; did you mean '{meant}'?" in message, message
    assert "\n" not in message


def test_a_key_like_no_known_one_gets_no_guess_and_every_problem_is_still_reported(tmp_path):
    study = write(tmp_path, changed(("zzzz", 1), ("n_trials", 0)))
    with pytest.raises(SpecError) as caught:
        load_spec(study, env={})
    message = str(caught.value)
    assert "zzzz: unknown key, not allowed" in message and "did you mean" not in message
    assert "n_trials: " in message


def test_a_timeout_flag_reaches_the_spec_as_a_number_validated_as_the_files(tmp_path):
    """`hpo tune --timeout` / `hpo submit --timeout`: a number that wins over the file's, with
    the file's rules, and no `timeout=` text for the workers' argv (they read the deadline
    from the study)."""
    study = write(tmp_path, {**BASE, "timeout": 600})
    assert load_spec(study, env={}).timeout == 600
    assert load_spec(study, env={}, timeout=90.5).timeout == 90.5
    assert load_spec(study, ["n_trials=9"], env={}, timeout=90.5).n_trials == 9
    with pytest.raises(
        SpecError, match=r"^\S+: timeout: Input should be greater than 0 \(got -1.0\)$"
    ):
        load_spec(study, env={}, timeout=-1.0)


# ---- one flag to try one value of a searched setting (issue #55 item 14) ------------------------

SMOKE = REPO / "studies" / "criteria-smoke.yaml"
SUPERMAX = REPO / "studies" / "criteria-supermax.yaml"


def test_a_set_on_a_searched_setting_fixes_it_and_ends_the_searches_it_conditions():
    """`--set train.criteria_formulation=whole_post` was refused ("is also fixed in train"):
    trying the whole post took a new file. Now it fixes the setting for the run, and a
    setting searched only for another formulation (long_text) is no longer searched."""
    spec = load_spec(SMOKE, ["train.criteria_formulation=whole_post"])
    assert spec.train["criteria_formulation"] == "whole_post"
    assert "criteria_formulation" not in spec.search_space
    assert "long_text" not in spec.search_space
    assert {"learning_rate", "encoder"} <= set(spec.search_space)  # the rest is searched as before
    assert "long_text" in load_spec(SMOKE, ["train.criteria_formulation=multilabel"]).search_space


def test_a_condition_the_fixed_value_meets_is_dropped_and_one_it_fails_drops_the_search():
    supermax = load_spec(SUPERMAX)
    conditioned = [
        n for n, p in supermax.search_space.items() if p.when and "criteria_formulation" in p.when
    ]
    assert conditioned, "the supermax spec conditions settings on the formulation"
    for value in ("whole_post", "multilabel"):
        spec = load_spec(SUPERMAX, [f"train.criteria_formulation={value}"])
        for name in conditioned:
            meets = value in supermax.search_space[name].when["criteria_formulation"]
            assert (name in spec.search_space) == meets, (value, name)
            if meets:
                assert "criteria_formulation" not in (spec.search_space[name].when or {})
        # a warm start of another formulation is left out; the rest lose what is not searched
        for start in spec.warm_start:
            assert start.get("criteria_formulation", value) == value
            assert set(start) <= set(spec.search_space) | set(spec.train), start


def test_a_null_search_space_entry_ends_that_search_in_one_flag():
    """`--set search_space.long_text=null` answered with pydantic's raw text."""
    spec = load_spec(SMOKE, ["search_space.long_text=null"])
    assert "long_text" not in spec.search_space and "encoder" in spec.search_space


def test_fewer_choices_for_a_setting_narrow_the_conditions_on_it():
    """`--set search_space.criteria_formulation.choices=[multilabel]` on the smoke spec, whose
    long_text is searched when the formulation is pairs or multilabel: the condition keeps
    what is left (here: always), and a search only a dropped choice takes ends."""
    spec = load_spec(SMOKE, ["search_space.criteria_formulation.choices=[multilabel]"])
    assert spec.search_space["long_text"].when is None
    both = load_spec(SUPERMAX, ["search_space.criteria_formulation.choices=[pairs, multilabel]"])
    assert both.search_space["long_text"].when is None  # both choices left take it
    assert "post_pooling" not in both.search_space  # whole_post's own: no choice left takes it
    one = load_spec(SMOKE, ["search_space.criteria_formulation.choices=[pairs]"])
    assert one.search_space["long_text"].when is None
