"""``sampler: {name: auto}``'s sampler: Optuna's GPSampler for a study's first finished trials,
then the spec's TPE.

Hand-written because Optuna 5 has no sampler that hands a study from one algorithm to another:
OptunaHub's AutoSampler does (GP, then others), but it is not part of Optuna, loads from the
network, and takes TPE as soon as the space holds a categorical parameter, which every hpo space
does. This class only delegates; both samplers are Optuna's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from hpo.attributes import PLAN_ATTR, SAMPLED_BY_ATTR
from hpo.study.storage._optuna_private import study_id, study_storage, trial_id

# SAMPLED_BY_ATTR names the sampler that proposed a trial ("gp" or "tpe"), as AutoSampler
# records its own choice; the study's PLAN_ATTR, recorded at creation, says in "gp_until" when
# this study hands over to TPE
_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)  # what n_trials and TPE's startup count


class StagedSampler(optuna.samplers.BaseSampler):
    """GP while the study has fewer than ``gp_until`` finished (complete or pruned) trials, TPE
    from then on. The study's recorded plan, where it has one, overrides ``gp_until`` (0: TPE
    from the first trial), so every worker hands over at the same trial count. The choice is
    made in ``before_trial``, so one trial's search space, samples and ``after_trial`` all come
    from the same sampler."""

    def __init__(
        self,
        gp: optuna.samplers.BaseSampler,
        tpe: optuna.samplers.BaseSampler,
        gp_until: int,
    ) -> None:
        self._samplers = {"gp": gp, "tpe": tpe}
        self._gp_until = gp_until
        self._planned: int | None = None  # the study's plan, read once
        self._active = "gp" if gp_until > 0 else "tpe"

    # Read through the storage, not the study: under HyperbandPruner Optuna hands samplers a
    # bracket's view of the study, which has no user_attrs and lists only that bracket's trials.
    def gp_until(self, study: optuna.Study) -> int:
        """The finished-trial count at which ``study`` hands over to TPE."""
        if self._planned is None:
            attrs = study_storage(study).get_study_user_attrs(study_id(study))
            plan = attrs.get(PLAN_ATTR) or {}
            self._planned = int(plan.get("gp_until", self._gp_until))
        return self._planned

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        storage = study_storage(study)
        finished = len(storage.get_all_trials(study_id(study), deepcopy=False, states=_FINISHED))
        self._active = "gp" if finished < self.gp_until(study) else "tpe"
        study_storage(study).set_trial_system_attr(trial_id(trial), SAMPLED_BY_ATTR, self._active)
        self._samplers[self._active].before_trial(study, trial)

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self._samplers[self._active].infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self._samplers[self._active].sample_relative(study, trial, search_space)

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._samplers[self._active].sample_independent(
            study, trial, param_name, param_distribution
        )

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        # the sampler that proposed it: a worker also ends other workers' stale trials
        sampler = trial.system_attrs.get(SAMPLED_BY_ATTR, self._active)
        self._samplers.get(sampler, self._samplers[self._active]).after_trial(
            study, trial, state, values
        )

    def reseed_rng(self) -> None:
        for sampler in self._samplers.values():
            sampler.reseed_rng()
