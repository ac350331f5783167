"""How ``hpo finalize`` runs, beside its spec: one object that the command's flags and
``hpo.finalize``'s keywords both build (as Ray Tune's ``TuneConfig`` serves its ``Tuner``),
checked by pydantic when it is made, so the pipeline checks nothing again.

A choice left None was not asked for: it takes its default (``settings``), and a rerun of a
finalized study names the ones asked for that differ from what it ran with.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from hpo.final.summary import Settings
from hpo.option_types import Count, Threads
from hpo.vocabulary import REFIT_WITH_VALIDATION, Ensemble, Refit


def _at_least_two_folds(k: int) -> int:
    if k == 1:
        raise ValueError("needs at least 2 folds (or 0 for none), got 1")
    return k


# folds as the flag takes them (hpo/cli/_common.py): 0 (none) or from 2
Folds = Annotated[int, Field(ge=0), AfterValidator(_at_least_two_folds)]

# Each default written once: what a choice left None becomes.
TOP_K = 3  # configurations retrained
SEEDS = 3  # seeds per configuration
REFIT: Refit = "train"  # the chosen model as trained
ENSEMBLE: Ensemble = "seeds"  # its seeds averaged (with --refit train+val: none, one model)
CV = 0  # no cross-validation

# the error type FinalizeOptions raises for --refit train+val with --ensemble seeds; the
# command and the API word it each in their own spelling of the two
ONE_MODEL_REFIT = "one_model_refit"


class FinalizeOptions(BaseModel):
    """What to retrain, how to choose and what to make of it, and how to run the retrainings."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    top_k: Count | None = None  # the study's best distinct configurations retrained
    seeds: Count | None = None  # seeds per configuration
    refit: Refit | None = None
    ensemble: Ensemble | None = None
    cv: Folds | None = None  # K folds of train + validation for the chosen configuration
    workers: Count = 1  # retrainings at a time
    threads: Threads | None = None  # CPU threads per retraining; None: the cores split evenly
    partial: bool = False  # finalize a search still running or short of n_trials
    progress: bool = True  # progress bars; False: logs only

    @model_validator(mode="after")
    def _refit_is_one_model(self) -> FinalizeOptions:
        if self.refit == REFIT_WITH_VALIDATION and self.ensemble == "seeds":
            raise PydanticCustomError(
                ONE_MODEL_REFIT, "refit train+val retrains one model, so it cannot be an ensemble"
            )
        return self

    def asked(self) -> dict[str, object]:
        """The choices as given, in ``Settings``' order; None: not asked for."""
        return {name: getattr(self, name) for name in Settings.model_fields}

    def settings(self) -> Settings:
        """The choices finalize runs with: those asked for, the rest their defaults."""
        ensemble = self.ensemble or ("none" if self.refit == REFIT_WITH_VALIDATION else ENSEMBLE)
        return Settings(
            top_k=TOP_K if self.top_k is None else self.top_k,
            seeds=SEEDS if self.seeds is None else self.seeds,
            refit=self.refit or REFIT,
            ensemble=ensemble,
            cv=CV if self.cv is None else self.cv,
        )
