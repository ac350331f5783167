"""Reading a study file: YAML read strictly, key=value overrides (a --set on a searched
setting fixes it and ends the searches it conditions), the storage and --timeout by
precedence."""

from __future__ import annotations

import pytest

from hpo.spec import DEFAULT_STORAGE, SpecError, load_spec, parse_override
from tests.support import REPO
from tests.support.study_files import BASE, changed, write


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
