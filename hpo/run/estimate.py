"""How much compute a study wants (``hpo validate --estimate``), from a timing of its own
training step: a few optimizer steps of the real run, scaled by the tokens an epoch reads."""

from __future__ import annotations

import dataclasses

from hpo.process import threads_per_process
from hpo.spec import StudySpec

# Validation runs forward passes only: about a third of a training step's forward + backward
# per token (backward costs about twice the forward).
FORWARD_SHARE = 1 / 3


def encoder_configs(spec: StudySpec, configs: list) -> dict[str, object]:
    """A TrainConfig for every encoder the spec searches (or its fixed one), by the spec's
    name for it: a sampled point's where one drew that encoder, else the first point's with
    the encoder swapped in (a few sampled points need not meet every encoder)."""
    chosen = {}
    for name in spec.encoders:
        path = str(spec.model_paths.get(name, name))
        drawn = next((config for config in configs if config.encoder == path), None)
        chosen[str(name)] = drawn or dataclasses.replace(configs[0], encoder=path)
    return chosen


def time_configs(
    spec: StudySpec, configs: dict[str, object], workers: int = 1, threads: int | None = None
) -> list[dict]:
    """Per named TrainConfig, in seconds, timed at the threads each of ``workers`` gets from
    ``hpo tune --workers N [--threads T]`` (``threads_per_process``; timed with every thread, an
    epoch of two workers on two cores was over-estimated ~15x): one epoch's training and
    validation, a trial over the fewest and most epochs searched, the whole study with
    ``workers`` trials at a time, and how many trials ``timeout`` buys."""
    import torch

    from hpo.run.preflight import searched_values
    from hpo.train.setup import time_steps

    epochs = searched_values(spec, "epochs", next(iter(configs.values())).epochs)
    low, high = min(epochs), max(epochs)
    estimates = []
    before = torch.get_num_threads()
    torch.set_num_threads(threads_per_process(workers, threads))
    try:  # one at a time: each is timed as one worker's trial
        timings = {
            name: time_steps(dataclasses.replace(config, checkpoint_dir=None, epochs=high))
            for name, config in configs.items()
        }
    finally:
        torch.set_num_threads(before)
    for name, timing in timings.items():
        config = configs[name]
        train = timing.seconds_per_token * timing.train_tokens_per_epoch
        validation = timing.seconds_per_token * FORWARD_SHARE * timing.validation_tokens
        shortest, longest = (timing.setup_seconds + n * (train + validation) for n in (low, high))
        estimates.append(
            {
                "encoder": name,
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


def estimate_notes(
    spec: StudySpec, configs: list, workers: int = 1, threads: int | None = None
) -> list[str]:
    """``time_configs`` of every encoder the spec searches in words, a note per encoder;
    ``configs``: the TrainConfigs of ``sample_points``, the warm start's first. The estimate is
    kept for the study (``record_trial_cost``): its creation plans on it, and ``hpo status``
    sets it beside the epochs the trials measure."""
    from hpo.study import record_trial_cost
    from hpo.train.loop import clock

    notes = []
    chosen = encoder_configs(spec, configs)
    estimates = time_configs(spec, chosen, workers, threads)
    for e in estimates:
        (low, high), (shortest, longest) = e["epochs"], e["trial_s"]
        span = clock(shortest) if low == high else f"{clock(shortest)}–{clock(longest)}"
        # the warm start runs first and is the recipe the search is measured against
        timed = chosen[e["encoder"]]
        point = (
            "the warm start"
            if any(
                dataclasses.replace(timed, encoder=config.encoder) == config
                for config in configs[: len(spec.warm_start)]
            )
            else "a sampled point"
        )
        notes.append(
            f"compute, encoder {e['encoder']} on {e['device']} "
            f"({e['threads']} thread{'s' * (e['threads'] != 1)}, {e['timed_steps']} steps of "
            f"{point} timed at batch "
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
    threads = estimates[0]["threads"]
    notes.append(
        f"  timed at {threads} thread{'s' * (threads != 1)}, what each of {workers} worker"
        f"{'s' * (workers > 1)} gets here (hpo tune --workers {workers}); the times scale with "
        "the machine that runs the trials"
    )
    # a full trial: the middle of the searched epochs, averaged over the encoders
    trial_s = round(sum(sum(e["trial_s"]) / 2 for e in estimates) / len(estimates), 1)
    per_encoder = {
        e["encoder"]: {
            "epoch_s": round(e["epoch_train_s"] + e["epoch_validation_s"], 3),
            "threads": e["threads"],
        }
        for e in estimates
    }
    path = record_trial_cost(spec, trial_s, workers, per_encoder)
    if spec.sampler.name == "auto":
        notes.extend(plan_search_notes(spec, trial_s, workers))
    notes.append(
        f"  (kept in {path}: the study plans on it when created, and hpo status sets it beside "
        "the epochs its trials take)"
    )
    return notes


def plan_search_notes(spec: StudySpec, trial_s: float, workers: int) -> list[str]:
    """What an ``auto`` study will do with the budget this estimate buys, and why (its
    creation reads the recorded cost and decides the same way)."""
    from hpo.study import plan_search

    return plan_search(spec, trial_s, workers).describe()
