"""A study's wall-clock budget: whether another trial may start, priced by the study's own
finished full runs, a whole trial's or, with a rung pruner, its first judgement's worth (no
training: trials are told made-up wall times)."""

from __future__ import annotations

from optuna.trial import TrialState


def test_no_trial_starts_that_the_time_budget_cannot_fit(sqlite_url, study_name):
    import optuna

    from hpo.study.search import start_time_budget, time_budget_spent
    from hpo.study.storage import get_storage

    study = optuna.create_study(study_name=study_name, storage=get_storage(sqlite_url))
    assert time_budget_spent(study, start_time_budget(study, 5)) is None, (
        "no finished trial: nothing to go by"
    )
    for seconds in (90, 100, 400):
        trial = study.ask()
        trial.set_user_attr("wall_seconds", seconds)
        study.tell(trial, 0.5)
    assert "less than a trial takes (100s, the median)" in time_budget_spent(
        study, start_time_budget(study, 60)
    )
    assert time_budget_spent(study, start_time_budget(study, 500)) is None
    assert time_budget_spent(study, start_time_budget(study, None)) is None


def test_with_a_rung_pruner_a_trial_starts_that_can_reach_its_first_judgement(
    sqlite_url, study_name
):
    """The real hour: 2 workers, ~35-minute trials, 25 minutes left after the first two. Too
    little for a whole trial, enough for the two epochs before Hyperband's first rung: that
    trial starts (the budget then ends it at an epoch's end, kept), where before both workers
    went idle."""
    import optuna

    from hpo.study.search import start_time_budget, time_budget_spent
    from hpo.study.storage import get_storage

    study = optuna.create_study(study_name=study_name, storage=get_storage(sqlite_url))
    for seconds, epochs, complete in ((2000, 4, True), (2200, 5, True), (700, 2, False)):
        trial = study.ask()
        trial.set_user_attr("wall_seconds", seconds)
        trial.set_user_attr("epochs_run", epochs)
        if complete:
            study.tell(trial, 0.5)
        else:
            study.tell(trial, state=TrialState.PRUNED)
    # paces 500, 440 and 350 s an epoch: the median 440, so the first rung takes 880 s
    left = 25 * 60
    assert time_budget_spent(study, start_time_budget(study, left)) is not None, (
        "without a rung, a whole median trial must fit"
    )
    assert time_budget_spent(study, start_time_budget(study, left), first_look=2) is None
    said = time_budget_spent(study, start_time_budget(study, 800), first_look=2)
    assert said is not None and "first judgement (880s: 2 epochs at the median 440s each)" in said


def test_the_time_budget_prices_a_trial_by_the_full_runs_not_the_screened_ones(
    sqlite_url, study_name
):
    """A run screened on a share of the training posts is quicker; the next trial may be a full
    run, so only full runs set the price (the safe side: a cheap screened run may go unstarted)."""
    import optuna

    from hpo.study.search import start_time_budget, time_budget_spent
    from hpo.study.storage import get_storage

    study = optuna.create_study(study_name=study_name, storage=get_storage(sqlite_url))
    for seconds, share in ((1000, None), (300, 0.25), (320, 0.25)):
        trial = study.ask()
        trial.set_user_attr("wall_seconds", seconds)
        trial.set_user_attr("epochs_run", 4)
        if share is not None:
            trial.set_user_attr("train_share", share)
        study.tell(trial, 0.5)
    said = time_budget_spent(study, start_time_budget(study, 600))
    assert said is not None and "(1000s, the median)" in said
    said = time_budget_spent(study, start_time_budget(study, 400), first_look=2)
    assert said is not None and "(500s: 2 epochs at the median 250s each)" in said
