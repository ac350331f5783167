"""P3: what the service adds per trial around the sampler and the database, at trial ~800
on PostgreSQL, against raw Optuna ask/tell on the same database with the same sampler
(the same seed too, so both sides propose the same points and do the same sampler work).

    python -m bench.run --only p3      # --postgres URL: another database
"""

from __future__ import annotations

import time

import numpy as np
import optuna
import sqlalchemy as sa

from bench.common import RUNS, write_spec
from bench.results import write_results
from hpo.errors import UsageError
from hpo.run.worker import run_worker
from hpo.spec import load_spec
from hpo.study import open_study
from hpo.study.records import claim, set_user_attrs, trial_census
from hpo.study.search import make_sampler, suggest
from hpo.study.storage import fail_stale, first_heartbeat, get_storage, rdb_backend

NAME = "p3"
DEFINITION = (
    "orchestration per trial at trial 790: mean interval between a run's trial completions, "
    "hpo's worker / raw Optuna ask+tell on the same database, sampler and seed"
)
SPACE = {
    "learning_rate": {"type": "float", "low": 1e-5, "high": 1e-3, "log": True},
    "weight_decay": {"type": "float", "low": 0.0, "high": 0.1},
    "warmup_ratio": {"type": "float", "low": 0.0, "high": 0.2},
    "head_dropout": {"type": "float", "low": 0.0, "high": 0.3},
    "head_layers": {"type": "int", "low": 0, "high": 2},
}


def measure(args) -> None:
    """``args.runs`` rounds on the database ``args.postgres`` names."""
    service_vs_raw(args.postgres, args.runs)


def service_vs_raw(url: str, runs: int = 5, prefill: int = 790, measured: int = 40) -> None:
    """``runs`` rounds, each a run of both sides in alternating order. Per run, the mean and the
    median interval between the measured trials' completions; per round, service / raw of each."""
    # 800 "trial finished" lines say nothing here
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        _ensure_database(url)
        get_storage(url)
    except (
        UsageError,
        sa.exc.SQLAlchemyError,
    ) as exc:  # no results file: the table says "not measured"
        print(f"P3 skipped: PostgreSQL not reachable ({exc})")
        return
    stamp = time.strftime("%H%M%S")
    spec_path = write_spec(
        f"p3-{stamp}",
        task="criteria",
        data_dir=str(RUNS / "data"),
        n_trials=prefill + measured,
        storage=url,
        output_dir=str(RUNS / "studies"),
        keep_top_k=0,
        sampler={"name": "tpe", "seed": 0},
        pruner={"name": "none"},
        train={"encoder": "unused"},
        search_space=SPACE,
    )
    spec = load_spec(spec_path, storage=url)

    def fast_objective(trial):  # no training: only the orchestration is measured
        params = suggest(trial, spec)
        return params["learning_rate"] * 100 + params["head_dropout"]

    def service_run(tag: str) -> dict:
        # Created as `hpo tune` creates it (open_study: uid, fingerprint); a study made by
        # bare Optuna has no uid, and the worker would wait 3 s for one.
        named = spec.model_copy(update={"name": f"{spec.name}-service-{tag}"})
        _prefilled(open_study(named), spec, prefill)
        _refresh_statistics(url)
        run_worker(named, worker="bench", objective=fast_objective, poll_seconds=0.05)
        return _ms_per_trial(open_study(named), prefill)

    def raw_run(tag: str) -> dict:
        name = f"{spec.name}-raw-{tag}"
        _prefilled(
            optuna.create_study(study_name=name, storage=url, direction="maximize"), spec, prefill
        )
        _refresh_statistics(url)
        raw = optuna.load_study(
            study_name=name,
            storage=optuna.storages.RDBStorage(url),
            sampler=make_sampler(spec, "bench"),
        )  # the worker's sampler, seed included
        for _ in range(measured):
            trial = raw.ask()
            raw.tell(trial, fast_objective(trial))
        return _ms_per_trial(raw, prefill)

    # Alternating, several times: one run of each varied more between runs than the two differ.
    rounds = []
    for repeat in range(runs):
        order = (("service", service_run), ("raw", raw_run))
        got = {side: run(str(repeat)) for side, run in (order if repeat % 2 == 0 else order[::-1])}
        rounds.append(
            {
                **{f"{side}_{k}": v for side, ms in got.items() for k, v in ms.items()},
                "mean_ratio": got["service"]["mean_ms"] / got["raw"]["mean_ms"],
                "median_ratio": got["service"]["median_ms"] / got["raw"]["median_ms"],
            }
        )
        print(
            f"[p3 round {repeat + 1}] mean {rounds[-1]['mean_ratio']:.2f}x, "
            f"median {rounds[-1]['median_ratio']:.2f}x",
            flush=True,
        )
    parts = _extra_work(
        open_study(spec.model_copy(update={"name": f"{spec.name}-service-0"}), worker="bench")
    )
    for summary in optuna.get_all_study_summaries(url):
        if summary.study_name.startswith(f"{spec.name}-"):
            optuna.delete_study(study_name=summary.study_name, storage=url)
    write_results(
        NAME,
        {
            "storage": "PostgreSQL on 127.0.0.1",
            "at_trial": prefill,
            "measured_trials": measured,
            "sampler": "TPE, the worker's seed on both sides (same proposals)",
            "search_space": SPACE,
            "rounds": "the two sides alternate in each round",
        },
        {"service / raw ask+tell": rounds},
        "mean_ratio",
        {"key": "service / raw ask+tell", "at_most": 1.1},
        definition=DEFINITION,
        also=(
            "median_ratio",
            "service_mean_ms",
            "raw_mean_ms",
            "service_median_ms",
            "raw_median_ms",
        ),
        details={"extra_ms": parts},
        command="python -m bench.run --only p3",
    )


def _extra_work(study: optuna.Study, repeats: int = 30) -> dict[str, float]:
    """Milliseconds of each thing a service trial does that raw ask/tell does not, on the
    same study at the same size, each next to what it replaced; and a real trial's 10 result
    attributes recorded one by one against one transaction (``set_user_attrs``)."""
    trial = study.ask()
    storage = rdb_backend(study._storage)
    results = {f"attr_{i}": i for i in range(10)}

    steps = {
        "census before a trial (one GROUP BY)": lambda: trial_census(study),
        "claim: worker attribute + census, one transaction": lambda: claim(
            trial, {"worker": "bench"}
        ),
        "before: worker attribute, then census": lambda: (
            trial.set_user_attr("worker", "bench"),
            trial_census(study, before=trial.number),
        ),
        "first heartbeat (one upsert)": lambda: first_heartbeat(trial),
        "before: Optuna's heartbeat write": lambda: optuna.storages.RDBStorage.record_heartbeat(
            storage, trial._trial_id
        ),
        "stale-trial check (one query; the worker makes it once a heartbeat interval)": lambda: (
            fail_stale(study)
        ),
        "before: Optuna's stale-trial check": lambda: (
            optuna.storages.RDBStorage._get_stale_trial_ids(storage, study._study_id)
        ),
        "10 result attributes, one commit each": lambda: [
            trial.set_user_attr(k, v) for k, v in results.items()
        ],
        "10 result attributes, set_user_attrs": lambda: set_user_attrs(trial, results),
    }
    timings = {}
    for label, step in steps.items():
        step()  # warm
        started = time.perf_counter()
        for _ in range(repeats):
            step()
        timings[label] = (time.perf_counter() - started) * 1000 / repeats
    study.tell(trial, 0.0)
    return timings


def _prefilled(study: optuna.Study, spec, n: int) -> optuna.Study:
    """``study`` holding n finished trials of the spec's parameters (random values)."""
    scratch = optuna.create_study(
        sampler=optuna.samplers.RandomSampler(seed=0), direction="maximize"
    )
    for value in np.random.default_rng(0).random(n):
        trial = scratch.ask()
        suggest(trial, spec)
        scratch.tell(trial, float(value))
    study.add_trials(scratch.trials)
    return study


def _ms_per_trial(study: optuna.Study, prefill: int) -> dict[str, float]:
    """Milliseconds from one measured trial's end to the next's, from the trials' own timestamps
    (what each trial costs once a worker runs, without its one-off start-up): the mean, which
    counts what is paid once a heartbeat interval and the odd pause of this shared machine, and
    the median, which counts neither."""
    ends = sorted(
        t.datetime_complete.timestamp()
        for t in study.get_trials(deepcopy=False)
        if t.number >= prefill
    )
    gaps = np.diff(ends) * 1000
    return {"mean_ms": float(np.mean(gaps)), "median_ms": float(np.median(gaps))}


def _refresh_statistics(url: str) -> None:
    """VACUUM ANALYZE after a bulk prefill, as autovacuum would have done on a study that grew
    over hours; left to autovacuum, it lands at random inside a measured run."""
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text("VACUUM ANALYZE"))
    engine.dispose()


def _ensure_database(url: str) -> None:
    target = sa.make_url(url)
    admin = sa.create_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if not conn.execute(
            sa.text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": target.database}
        ).scalar():
            conn.execute(sa.text(f'CREATE DATABASE "{target.database}"'))
    admin.dispose()
