"""P1 (the same work on both sides) and time to equal quality (the formulation lever).

    python -m bench.run --only p1

One round runs three searches one after the other, in an order that rotates between rounds:
  - the Trainer: ``Trainer.hyperparameter_search`` on (criterion, post) pairs, weighted loss;
  - the service on the same pairs (``criteria_formulation: pairs``), ``hpo tune --workers 2``;
  - the service's multilabel formulation (each post read once for nine logits), same command.
All three: same checkpoint, examples, split, search space, TPE seed 0, trials, epochs, batch size,
max_length and class weighting; float32; every epoch evaluated by the same post macro-F1 code.

P1 = service (pairs) wall time / Trainer wall time, whole commands as a user waits for them.
Time to equal quality = seconds from launch until the multilabel search first evaluates a
post macro-F1 at least the Trainer's best, over the seconds until the Trainer first reached
its best. The service's evaluation times come from polling its study once every POLL seconds
(they are late by at most that); the Trainer's from a callback, exact.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import optuna

from bench.common import RUNS, Headline, hpo_cmd, timed_run, write_headlines
from bench.workload import (
    SAMPLE_FRACTIONS,
    data_words,
    described,
    encoder_path,
    sample_data,
    service_spec,
)

NAME = "p1"  # also writes time_to_quality.json from the same rounds
DEFINITION = (
    "wall time of the whole search, hpo tune --workers 2 on (criterion, post) pairs / "
    "Trainer.hyperparameter_search on the same pairs: same examples, split, epochs, trials, "
    "class weighting"
)
TIME_TO_QUALITY = (
    "seconds from launch until hpo tune --workers 2 (multilabel: each post read once for nine "
    "logits) first evaluates a post macro-F1 at least the Trainer's best, over the seconds until "
    "Trainer.hyperparameter_search (pairs) first reached its best; same split"
)
HEADLINES = (  # every round goes into both files
    Headline(
        NAME,
        "same work",
        "p1_ratio",
        {"at_most": 0.4},
        DEFINITION,
        (
            "trainer_seconds",
            "service_pairs_seconds",
            "trainer_best_post_macro_f1",
            "service_pairs_best_post_macro_f1",
        ),
    ),
    Headline(
        "time_to_quality",
        "multilabel vs Trainer",
        "time_to_quality_ratio",
        {"at_most": 0.2},
        TIME_TO_QUALITY,
        (
            "trainer_reached_s",
            "service_multilabel_reached_s",
            "target_post_macro_f1",
            "service_multilabel_best_post_macro_f1",
            "service_pairs_quality_ratio",
        ),
    ),
)
POLL = 0.5  # seconds between looks at the service's study
# Big enough that the Trainer learns (at 30 posts, 2 epochs and 64 tokens its best post macro-F1 was
# 0.000: no quality to reach), small enough for 5 rounds on a 2-core machine.
EPOCHS, TRIALS, MAX_LENGTH = 3, 2, 128
POSTS = 80  # 48 training posts (432 pairs), 24 validation posts
STORAGE = f"sqlite:///{RUNS / 'p1.db'}"


def measure(args) -> None:
    """``args.runs`` rounds; writes p1.json and time_to_quality.json."""
    encoder, encoder_name = encoder_path()
    (RUNS / "p1.db").unlink(missing_ok=True)
    data = data_words(args.data_dir, POSTS, SAMPLE_FRACTIONS)
    data_dir = sample_data(f"data-{POSTS}", POSTS, args.data_dir)

    def spec_for(name: str, formulation: str) -> tuple[str, str]:
        return name, service_spec(
            name,
            data_dir,
            encoder,
            TRIALS,
            STORAGE,
            train={"epochs": EPOCHS, "max_length": MAX_LENGTH, "criteria_formulation": formulation},
        )

    rounds = []
    for round_no in range(args.runs):
        rounds.append(one_round(round_no, encoder, data_dir, spec_for))
        print(
            f"[p1 round {round_no + 1}] P1 {rounds[-1]['p1_ratio']:.2f}x, time to quality "
            f"{rounds[-1].get('time_to_quality_ratio')}",
            flush=True,
        )
    shape = (
        f"{TRIALS} trials x {EPOCHS} epochs each side, max_length {MAX_LENGTH}, "
        "batch 16, search space learning_rate [2e-5, 2e-4] log x weight_decay [0, 0.1], "
        "TPE seed 0, float32, "
        "balanced class weighting on both sides (the Trainer's through compute_loss), "
        "every epoch evaluated"
    )
    load = described(
        encoder_name,
        data,
        shape=shape,
        rounds=f"{args.runs} rounds; each runs the three searches in a rotated order",
        service="hpo tune --workers 2 (1 thread each)",
        trainer=(
            "bench/trainer_baseline.py: Trainer.hyperparameter_search, optuna backend, 2 threads"
        ),
    )
    runs = dict.fromkeys((h.name for h in HEADLINES), rounds)
    write_headlines(HEADLINES, runs, load, f"python -m bench.run --only {NAME}")


def one_round(round_no: int, encoder: str, data_dir: str, spec_for) -> dict:
    """One round: the three searches in a rotated order; each side's seconds and evaluations."""
    sides = {
        "trainer": lambda: _trainer(round_no, encoder, data_dir),
        "service_pairs": lambda: _service(spec_for(f"p1-pairs-{round_no}", "pairs")),
        "service_multilabel": lambda: _service(spec_for(f"p1-multilabel-{round_no}", "multilabel")),
    }
    order = list(sides)[round_no % 3 :] + list(sides)[: round_no % 3]
    got = {side: sides[side]() for side in order}
    trainer = got["trainer"]
    target = max(e["post_macro_f1"] for e in trainer["evaluations"])
    trainer_reached = _first_reaching(trainer["evaluations"], target)
    run = {
        "order": order,
        "target_post_macro_f1": target,
        "trainer_reached_s": trainer_reached,
        **{
            f"{side}_{key}": value
            for side, result in got.items()
            for key, value in result.items()
            if key != "evaluations"
        },
    }
    run["p1_ratio"] = got["service_pairs"]["seconds"] / trainer["seconds"]
    if target > 0:  # a Trainer that never predicted a symptom sets no quality to reach: no figure
        for side in ("service_pairs", "service_multilabel"):
            reached = _first_reaching(got[side]["evaluations"], target)
            run[f"{side}_reached_s"] = reached
            run[f"{side}_quality_ratio"] = (
                reached / trainer_reached if reached is not None else None
            )
        run["time_to_quality_ratio"] = run["service_multilabel_quality_ratio"]
    run["evaluations"] = {side: result["evaluations"] for side, result in got.items()}
    return run


def _first_reaching(evaluations: list[dict], target: float) -> float | None:
    times = [e["seconds"] for e in evaluations if e["post_macro_f1"] >= target - 1e-9]
    return min(times) if times else None


def _trainer(round_no: int, encoder: str, data_dir: str) -> dict:
    out = RUNS / f"p1-trainer-{round_no}.json"
    cmd = [
        sys.executable,
        "-m",
        "bench.trainer_baseline",
        encoder,
        data_dir,
        "--trials",
        str(TRIALS),
        "--epochs",
        str(EPOCHS),
        "--max-length",
        str(MAX_LENGTH),
        "--out",
        str(out),
    ]
    launched = time.time()
    seconds, _ = timed_run(cmd)
    result = json.loads(out.read_text())
    return {
        "seconds": seconds,
        "best_post_macro_f1": result["best_post_macro_f1"],
        "train_tokens_per_epoch": result["train_tokens_per_epoch"],
        "train_examples": result["train_examples"],
        "evaluations": [
            {"seconds": e["time"] - launched, "post_macro_f1": e["post_macro_f1"]}
            for e in result["evaluations"]
        ],
    }


def _service(spec: tuple[str, str]) -> dict:
    name, path = spec
    stop, seen = threading.Event(), {}
    launched = time.time()
    watcher = threading.Thread(target=_watch, args=(name, launched, seen, stop), daemon=True)
    watcher.start()
    try:
        seconds, _ = timed_run(hpo_cmd("tune", path, "--workers", "2", "--no-progress"))
    finally:
        stop.set()
        watcher.join()
    study = optuna.load_study(study_name=name, storage=STORAGE)
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    for trial in done:  # a value the last look missed: seen at the command's end at the latest
        for epoch, value in trial.intermediate_values.items():
            seen.setdefault((trial.number, epoch), (seconds, value))
    return {
        "seconds": seconds,
        "best_post_macro_f1": study.best_value,
        "train_tokens_per_epoch": round(
            sum(t.user_attrs["tokens_trained"] for t in done) / len(done) / EPOCHS
        ),
        "evaluations": [
            {"seconds": s, "post_macro_f1": v, "trial": n, "epoch": e}
            for (n, e), (s, v) in sorted(seen.items(), key=lambda kv: kv[1][0])
        ],
    }


def _watch(name: str, launched: float, seen: dict, stop: threading.Event) -> None:
    """Each epoch's value and the first time it was seen in the study, as a dashboard sees it."""
    storage = optuna.storages.RDBStorage(STORAGE, engine_kwargs={"connect_args": {"timeout": 60}})
    while not stop.wait(POLL):
        try:
            study_id = storage.get_study_id_from_name(name)
            trials = storage.get_all_trials(study_id, deepcopy=False)
        except Exception:  # noqa: BLE001 - not created yet, or busy: look again
            continue
        now = time.time() - launched
        for trial in trials:
            for epoch, value in trial.intermediate_values.items():
                seen.setdefault((trial.number, epoch), (now, value))
