"""finalize's options (hpo.final.options): the defaults a choice left None takes, once, and
what they refuse, as the API raises it and as the command words it by its flags."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hpo.errors import UsageError
from hpo.final.options import FinalizeOptions


def test_the_options_fill_in_their_defaults_once():
    assert FinalizeOptions().settings().model_dump() == {
        "top_k": 3,
        "seeds": 3,
        "refit": "train",
        "ensemble": "seeds",
        "cv": 0,
    }
    # a refit on train + validation is one model: no ensemble unless asked (and then refused)
    assert FinalizeOptions(refit="train+val").settings().ensemble == "none"
    assert FinalizeOptions(top_k=2).asked() == {
        "top_k": 2,
        "seeds": None,
        "refit": None,
        "ensemble": None,
        "cv": None,
    }


@pytest.mark.parametrize(
    "given",
    [{"refit": "train+val", "ensemble": "seeds"}, {"cv": 1}, {"cv": -1}, {"top_k": 0}],
)
def test_the_options_refuse_what_the_flags_refuse(given):
    with pytest.raises(ValidationError):
        FinalizeOptions(**given)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--cv", "1"], "--cv K needs K >= 2 folds (or 0 for none), got 1"),
        (["--cv", "-3"], "--cv K needs K >= 2 folds (or 0 for none), got -3"),
        (
            ["--refit", "train+val", "--ensemble", "seeds"],
            "--refit train+val retrains one model, so it cannot be an ensemble; "
            "pass --ensemble none with it, or leave --refit out",
        ),
    ],
)
def test_the_command_words_a_refused_option_by_its_flags(tmp_path, flags, message):
    from hpo.cli import build_parser

    args = build_parser().parse_args(["finalize", str(tmp_path / "spec.yaml"), *flags])
    with pytest.raises(UsageError) as refused:
        args.func(args)
    assert str(refused.value) == message
