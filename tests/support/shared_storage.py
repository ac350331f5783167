"""The tests' own reads of a study: one Optuna storage per URL for the whole session.

``optuna.load_study(storage=URL)`` builds a new engine on every call, and its pooled
connections stay open until the garbage collector breaks the engine's reference cycles,
which in a process as large as the test run can take hundreds of tests. A test polling a
study every 0.3 s for minutes would exhaust PostgreSQL's 100 clients (CI did, once)."""

from __future__ import annotations

import functools
import time

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


def delete_until_gone(name: str, url: str, tries: int = 20) -> None:
    """``optuna delete-study`` as a user repeats it: Optuna's delete_study swallows the
    IntegrityError of a row a worker inserts meanwhile (a heartbeat, a report) and then
    deletes nothing, which a loaded machine makes likely."""
    for _ in range(tries):
        optuna.delete_study(study_name=name, storage=storage(url))
        if name not in optuna.get_all_study_names(storage=storage(url)):
            return
        time.sleep(0.5)
    raise AssertionError(f"study {name} still exists after {tries} deletes")


def wait_for(condition, seconds: float, what: str):
    """``condition()``'s first truthy value, polled every 0.3 s for up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if result := condition():
            return result
        time.sleep(0.3)
    raise AssertionError(f"waited {seconds}s for {what}")


def running_trials(name: str, url: str, n: int) -> list:
    """The study's RUNNING trials once there are at least ``n``; none before."""
    running = [t for t in read_trials(name, url) if t.state.name == "RUNNING"]
    return running if len(running) >= n else []


def write_recorded_spec(name: str, url: str, value_json: str) -> None:
    """Overwrite the spec the study recorded (its ``hpo:spec`` system attribute) as any writer
    of its database can: with any text, JSON or not."""
    import sqlalchemy as sa

    engine = storage(url).engine
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "UPDATE study_system_attributes SET value_json = :value WHERE key = 'hpo:spec' "
                "AND study_id = (SELECT study_id FROM studies WHERE study_name = :name)"
            ),
            {"value": value_json, "name": name},
        )


def edit_recorded_spec(study: str, url: str, **changes) -> dict:
    """Change top-level keys of the recorded spec of the study named ``study`` in its database
    (``tracking={...}``); returns the document as it was."""
    import json

    rdb = storage(url)
    document = rdb.get_study_system_attrs(rdb.get_study_id_from_name(study))["hpo:spec"]
    write_recorded_spec(study, url, json.dumps({**document, **changes}))
    return document
