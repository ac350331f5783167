"""A worker stopped by a signal (hpo.run.interrupt), on a real SQLite study with no training:
the trial it ran is failed as interrupted and queued again with its parameters, in one line; a
trial that had failed for its own reason is not retried, and a worker between trials only says
it stopped."""

from __future__ import annotations

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from hpo.attributes import FAIL_REASON_ATTR
from hpo.run.interrupt import INTERRUPTED, interrupted
from hpo.spec import HeartbeatSpec
from hpo.study.storage import get_storage

X = {"x": FloatDistribution(0.0, 1.0)}


def test_the_interrupted_trial_is_failed_saying_so_and_queued_again_with_its_parameters(
    sqlite_url, study_name
):
    study = optuna.create_study(study_name=study_name, storage=get_storage(sqlite_url))
    running = study.ask(X)
    said = interrupted(study, "vm/0", running.number, HeartbeatSpec())
    assert said == f"worker vm/0 interrupted; its running trial {running.number} was re-queued"
    failed = study.trials[running.number]
    assert failed.state == TrialState.FAIL
    assert failed.user_attrs[FAIL_REASON_ATTR] == INTERRUPTED
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert [t.params for t in waiting] == [failed.params]


def test_a_trial_failed_for_its_own_reason_is_not_retried_and_no_trial_is_no_news(
    sqlite_url, study_name
):
    study = optuna.create_study(study_name=study_name, storage=get_storage(sqlite_url))
    broken = study.ask(X)
    broken.set_user_attr(FAIL_REASON_ATTR, "CUDA out of memory")
    study.tell(broken, state=TrialState.FAIL)
    assert interrupted(study, "vm/0", broken.number, HeartbeatSpec()) == "worker vm/0 interrupted"
    assert interrupted(study, "vm/0", None, HeartbeatSpec()) == "worker vm/0 interrupted"
    assert not study.get_trials(states=(TrialState.WAITING,))
