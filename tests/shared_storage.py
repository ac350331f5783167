"""The tests' own reads of a study: one Optuna storage per URL for the whole session.

``optuna.load_study(storage=URL)`` builds a new engine on every call, and its pooled
connections stay open until the garbage collector breaks the engine's reference cycles,
which in a process as large as the test run can take hundreds of tests. A test polling a
study every 0.3 s for minutes would exhaust PostgreSQL's 100 clients (CI did, once)."""

from __future__ import annotations

import functools

import optuna


@functools.cache
def storage(url: str) -> optuna.storages.RDBStorage:
    # pre-ping: some tests restart or cut the database under a cached engine
    return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})


def read_study(name: str, url: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=storage(url))


def read_trials(name: str, url: str) -> list[optuna.trial.FrozenTrial]:
    """The study's trials; none when no worker has created it yet."""
    try:
        return read_study(name, url).get_trials()
    except KeyError:
        return []
