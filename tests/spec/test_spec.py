"""Study files, whole: every broken one fails on one line naming the key, whichever part of
hpo.spec refuses it (the shipped studies: test_study_spec.py)."""

from __future__ import annotations

import pytest

from hpo.spec import (
    SpecError,
    load_spec,
)
from tests.support.study_files import BASE, DELETE, changed, write

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
