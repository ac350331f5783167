"""The launcher's circuit breaker, fed what a launcher sees: trial outcomes and worker exits."""

from __future__ import annotations

from hpo.run.breaker import CircuitBreaker

BOOM = "ValueError: max_length=8 is too short"


def test_five_failures_with_one_reason_trip_it_and_name_the_reason():
    breaker = CircuitBreaker(failed_trials=5)
    recent = [("complete", None)] + [("fail", BOOM)] * 4
    assert breaker.check_trials(recent) is None
    reason = breaker.check_trials(recent[1:] + [("fail", BOOM + "\n  traceback line")])
    assert reason == f"5 trials in a row failed with: {BOOM}"


def test_a_success_or_another_reason_in_the_run_keeps_it_closed():
    breaker = CircuitBreaker(failed_trials=3)
    assert breaker.check_trials([("fail", BOOM), ("pruned", None), ("fail", BOOM)]) is None
    assert (
        breaker.check_trials([("fail", BOOM), ("fail", "OutOfMemoryError: x"), ("fail", BOOM)])
        is None
    )
    assert breaker.check_trials([("fail", BOOM)] * 2) is None  # too few to judge


def test_failures_without_a_reason_still_trip_it():
    assert CircuitBreaker(failed_trials=2).check_trials([("fail", None), ("fail", "")]) == (
        "2 trials in a row failed with: no reason recorded"
    )


def test_workers_dying_with_no_progress_trip_it_and_progress_resets_the_count():
    breaker = CircuitBreaker(worker_deaths=3)
    assert breaker.worker_exited(1, finished=4) is None
    assert breaker.worker_exited(0, finished=4) is None  # a clean exit is no death
    assert breaker.worker_exited(1, finished=4) is None
    assert breaker.worker_exited(1, finished=5) is None  # a trial finished in between: count again
    assert breaker.worker_exited(1, finished=5) is None
    reason = breaker.worker_exited(-9, finished=5)
    assert (
        reason and reason.startswith("workers died 3 times in a row") and "exit code -9" in reason
    )
