"""How much compute a study wants (``hpo validate --estimate``), from a timing of its own
training step: a few optimizer steps of the real run, scaled by the tokens an epoch reads."""

from __future__ import annotations

import dataclasses

from hpo.spec import StudySpec

# Validation runs forward passes only: about a third of a training step's forward + backward
# per token (backward costs about twice the forward).
FORWARD_SHARE = 1 / 3
ENCODERS_TIMED = 3  # a spec searching more encoders gets the first three sampled


def encoder_estimates(spec: StudySpec, configs: list, workers: int = 1) -> list[dict]:
    """Per encoder among ``configs`` (sampled points' TrainConfigs), in seconds: one epoch's
    training and validation, a trial over the fewest and most epochs searched, the whole
    study with ``workers`` trials at a time, and how many trials ``timeout`` buys."""
    from hpo.run.preflight import searched_values
    from hpo.train.setup import time_steps

    by_encoder = {}
    for config in configs:
        by_encoder.setdefault(config.encoder, config)
    epochs = searched_values(spec, "epochs", configs[0].epochs)
    low, high = min(epochs), max(epochs)
    estimates = []
    for encoder, config in list(by_encoder.items())[:ENCODERS_TIMED]:
        timing = time_steps(dataclasses.replace(config, checkpoint_dir=None, epochs=high))
        train = timing.seconds_per_token * timing.train_tokens_per_epoch
        validation = timing.seconds_per_token * FORWARD_SHARE * timing.validation_tokens
        shortest, longest = (timing.setup_seconds + n * (train + validation) for n in (low, high))
        estimates.append(
            {
                "encoder": _name(spec, encoder),
                "device": str(timing.device),
                "threads": timing.threads,
                "timed_steps": timing.timed_steps,
                "batch_size": config.batch_size,
                "max_length": config.max_length,
                "steps_per_epoch": timing.steps_per_epoch,
                "setup_s": timing.setup_seconds,
                "epochs": (low, high),
                "epoch_train_s": train,
                "epoch_validation_s": validation,
                "trial_s": (shortest, longest),
                "study_s": spec.n_trials * (shortest + longest) / 2 / workers,
                "workers": workers,
                "timeout_trials": int(spec.timeout * workers // longest) if spec.timeout else None,
            }
        )
    return estimates


def estimate_notes(spec: StudySpec, configs: list, workers: int = 1) -> list[str]:
    """``encoder_estimates`` in words, a note per encoder."""
    from hpo.train.loop import clock

    notes = []
    estimates = encoder_estimates(spec, configs, workers)
    for e in estimates:
        (low, high), (shortest, longest) = e["epochs"], e["trial_s"]
        span = clock(shortest) if low == high else f"{clock(shortest)}–{clock(longest)}"
        notes.append(
            f"compute, encoder {e['encoder']} on {e['device']} "
            f"({e['threads']} threads, {e['timed_steps']} steps timed at batch "
            f"{e['batch_size']}, max_length {e['max_length']}): an epoch ≈ "
            f"{clock(e['epoch_train_s'])} training ({e['steps_per_epoch']} steps) + "
            f"{clock(e['epoch_validation_s'])} validation; a trial "
            f"of {low if low == high else f'{low}–{high}'} epochs ≈ {span}; {spec.n_trials} trials "
            f"≈ {clock(e['study_s'])} with {workers} at a time (unpruned; pruning ends many sooner)"
        )
        if e["timeout_trials"] is not None:
            fits = e["timeout_trials"]
            notes.append(
                f"  timeout {clock(spec.timeout)}: about {fits} trials of {high} epochs fit "
                f"({fits / spec.n_trials:.0%} of n_trials)"
            )
    notes.append(
        "  the times scale with this machine: workers on their own GPUs or machines divide the "
        "study's time; workers sharing one CPU split its cores and barely do"
    )
    if spec.sampler.name == "auto":
        notes.extend(strategy_notes(spec, estimates, workers))
    return notes


def strategy_notes(spec: StudySpec, estimates: list[dict], workers: int) -> list[str]:
    """What an ``auto`` study will do with the budget this estimate buys, and why; the cost of
    a full trial (the middle of the searched epochs, averaged over the encoders timed) is
    recorded for the study's creation, which decides the same way."""
    from hpo.study import plan_search, record_trial_cost

    trial_s = round(sum(sum(e["trial_s"]) / 2 for e in estimates) / len(estimates), 1)
    path = record_trial_cost(spec, trial_s, workers)
    return [
        *plan_search(spec, trial_s, workers).describe(),
        f"  (a trial's cost is kept in {path}; the study decides when it is created)",
    ]


def _name(spec: StudySpec, encoder: str) -> str:
    """The spec's short name for an encoder path, where it has one."""
    return next((name for name, path in spec.model_paths.items() if str(path) == encoder), encoder)
