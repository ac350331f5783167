"""The study file's ``train`` settings against ``TrainConfig``: which fields a study may set
(the rest come from its top level, from finalize or from the fidelity section), which take
integers or numbers, the limits past any budget, and the adapter that builds a trial's
config."""

from __future__ import annotations

import dataclasses
import difflib
from typing import get_args, get_type_hints

from pydantic import TypeAdapter

from hpo.spec._base import _problem, takes_numbers
from hpo.train.config import TrainConfig

# Past any budget, so a number this large is a typo (as MAX_TRIALS for the study), checked where
# the spec builds its trial configs: fine-tuning runs a few epochs (the supermax specs search
# 2-6), and the pruner's rungs follow from them.
TRAIN_LIMITS = {"epochs": 1000}

# TrainConfig fields that come from the spec's top level (or per trial), never from
# train/search_space.
_FROM_TOP_LEVEL = {
    "task": "task",
    "data_dir": "data_dir",
    "objective_metric": "metric",
    "checkpoint_dir": "output_dir",
}
# a refit's and --cv's settings: a search that trained on validation would judge itself on it
_FINALIZE_ONLY = {"train_on", "cv_fold"}
# the search's low-fidelity runs set it; a search that trained every trial on a share would
# hand finalize a configuration judged on less data than it retrains on
_FIDELITY_ONLY = {"train_share"}
SETTABLE_FIELDS = (
    TrainConfig.field_names() - _FROM_TOP_LEVEL.keys() - _FINALIZE_ONLY - _FIDELITY_ONLY
)
_INTEGER_FIELDS = frozenset(
    name for name, hint in get_type_hints(TrainConfig).items() if int in (get_args(hint) or (hint,))
)
# pydantic's lax mode reads true as 1 there: `epochs: yes` would train one epoch
_NUMBER_FIELDS = frozenset(
    name for name, hint in get_type_hints(TrainConfig).items() if takes_numbers(hint)
)
# checks field types (and coerces "1e-5"), ranges, then the rules across fields
_TRAIN_CONFIG = TypeAdapter(TrainConfig)
# what a trial takes for a setting its study leaves alone: written once, in TrainConfig
TRAIN_DEFAULTS = {
    field.name: field.default
    for field in dataclasses.fields(TrainConfig)
    if field.default is not dataclasses.MISSING
}


def _check_settable(name: str, at: str) -> None:
    if name in _FROM_TOP_LEVEL:
        raise _problem(f"comes from the top-level '{_FROM_TOP_LEVEL[name]}' key", at=at)
    if name in _FINALIZE_ONLY:
        raise _problem(
            "is set by hpo finalize --refit train+val, never in a search (it would judge itself on "
            "data it trained on)",
            at=at,
        )
    if name in _FIDELITY_ONLY:
        raise _problem(
            "is set by the fidelity section for the search's low-fidelity runs; set "
            "fidelity.train_share instead",
            at=at,
        )
    if name not in SETTABLE_FIELDS:
        close = difflib.get_close_matches(name, SETTABLE_FIELDS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise _problem(f"is not a TrainConfig setting{hint}", at=at)
