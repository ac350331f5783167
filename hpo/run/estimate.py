"""How much compute a study wants (``hpo validate --estimate``), from a timing of its own
training step: a few optimizer steps of the real run, scaled by the tokens an epoch reads.
Every choice the search space can make of the settings that change an epoch's cost by
multiples is timed, not only the one a sampled point happened to draw."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from hpo.process import threads_per_process
from hpo.run.trial_line import compact_params
from hpo.spec import CategoricalParam, StudySpec

# Validation runs forward passes only: about a third of a training step's forward + backward
# per token (backward costs about twice the forward).
FORWARD_SHARE = 1 / 3
# The settings whose choices change an epoch's cost by multiples: the model, and how many
# tokens an epoch reads (each post once, or once per criterion: 9x; a long post cut, or read
# whole in chunks). Each combination of their choices the space can draw is timed, so a choice
# added to the vocabulary (a new formulation) is priced as soon as a spec searches it. The
# other settings (learning rate, batch size, max_length, ...) are the timed point's.
PRICED = ("encoder", "criteria_formulation", "long_text")


def priced_choices(spec: StudySpec) -> list[dict[str, object]]:
    """Every combination of the PRICED settings' choices the search space can draw, the
    encoder always named (the fixed one where it is not searched): ``{"encoder": "roberta-base",
    "criteria_formulation": "pairs"}``. A conditional setting is priced where its condition
    holds; one whose condition names another setting, with each of its choices."""
    searched = {
        name: param
        for name, param in spec.search_space.items()
        if name in PRICED and isinstance(param, CategoricalParam)
    }
    choices: list[dict[str, object]] = [
        {} if "encoder" in searched else {"encoder": spec.encoders[0]}
    ]
    for name, param in searched.items():
        choices = [
            widened
            for choice in choices
            for widened in (
                [{**choice, name: value} for value in param.choices]
                if _applies(spec, name, choice)
                else [choice]
            )
        ]
    return choices


def _applies(spec: StudySpec, name: str, choice: Mapping[str, object]) -> bool:
    parents = set(spec.search_space[name].when or {})
    return not parents <= set(PRICED) or spec.applies(name, choice)


def choice_configs(
    spec: StudySpec, points: Sequence[dict[str, object]]
) -> dict[str, tuple[dict[str, object], object, bool]]:
    """Per priced choice, named as a trial's line names it (``encoder=roberta-base
    formulation=pairs``): the choice, its TrainConfig, and whether that is the warm start's.
    ``points``: ``sample_points``' (the warm start first); a choice's config is the first point
    that drew it, else the first point with the choice swapped in (a few sampled points need not
    meet every choice)."""
    chosen = {}
    for choice in priced_choices(spec):
        drawn = next(
            (
                (point, index < len(spec.warm_start))
                for index, point in enumerate(points)
                if all(point.get(k, spec.train.get(k)) == v for k, v in choice.items())
            ),
            None,
        )
        point, warm = drawn or (_swapped(spec, points[0], choice), False)
        name = compact_params(choice, [k for k in PRICED if k in choice], limit=None)
        chosen[name] = (choice, spec.train_config(point, None), warm)
    return chosen


def _swapped(
    spec: StudySpec, point: Mapping[str, object], choice: Mapping[str, object]
) -> dict[str, object]:
    """``point`` with ``choice`` in it, as the space could draw it: a parameter whose condition
    no longer holds left out, one whose condition now holds at its first choice (or low end)."""
    wanted = {**point, **{k: v for k, v in choice.items() if k in spec.search_space}}
    swapped: dict[str, object] = {}
    for name, param in spec.search_space.items():
        if spec.applies(name, swapped):
            first = param.choices[0] if isinstance(param, CategoricalParam) else param.low
            swapped[name] = wanted.get(name, first)
    return swapped


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
                "name": name,
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
    spec: StudySpec,
    points: Sequence[dict[str, object]],
    workers: int = 1,
    threads: int | None = None,
) -> list[str]:
    """``time_configs`` of every priced choice (``priced_choices``) in words, a note each, then
    the study and its timeout over them; ``points``: ``sample_points``', the warm start's first.
    The estimate is kept for the study (``record_trial_cost``): its creation plans on it, and
    ``hpo status`` sets each choice's epoch beside the epochs its trials measure."""
    from hpo.study.search import record_trial_cost
    from hpo.train.loop import clock

    chosen = choice_configs(spec, points)
    configs = {name: config for name, (_, config, _) in chosen.items()}
    estimates = time_configs(spec, configs, workers, threads)
    notes = []
    for e in estimates:
        (low, high), (shortest, longest) = e["epochs"], e["trial_s"]
        span = clock(shortest) if low == high else f"{clock(shortest)}–{clock(longest)}"
        # the warm start runs first and is the recipe the search is measured against
        point = "the warm start" if chosen[e["name"]][2] else "a sampled point"
        notes.append(
            f"compute, {e['name']} on {e['device']} "
            f"({e['threads']} thread{'s' * (e['threads'] != 1)}, {e['timed_steps']} steps of "
            f"{point} timed at batch {e['batch_size']}, max_length {e['max_length']}): an epoch ≈ "
            f"{clock(e['epoch_train_s'])} training ({e['steps_per_epoch']} steps) + "
            f"{clock(e['epoch_validation_s'])} validation; a trial "
            f"of {low if low == high else f'{low}–{high}'} epochs ≈ {span}"
        )
    notes += _study_notes(spec, estimates, workers)
    threads = estimates[0]["threads"]
    notes.append(
        f"  timed at {threads} thread{'s' * (threads != 1)}, what each of {workers} worker"
        f"{'s' * (workers > 1)} gets here (hpo tune --workers {workers}); the times scale with "
        "the machine that runs the trials"
    )
    # a full trial: the middle of the searched epochs, averaged over the choices (the sampler
    # draws each alike until it learns which pay)
    trial_s = round(sum(sum(e["trial_s"]) / 2 for e in estimates) / len(estimates), 1)
    timed = [
        {
            "params": chosen[e["name"]][0],
            "epoch_s": round(e["epoch_train_s"] + e["epoch_validation_s"], 3),
            "threads": e["threads"],
        }
        for e in estimates
    ]
    path = record_trial_cost(spec, trial_s, workers, timed)
    if spec.sampler.name == "auto":
        notes.extend(plan_search_notes(spec, trial_s, workers))
    notes.append(
        f"  (kept in {path}: the study plans on it when created, and hpo status sets it beside "
        "the epochs its trials take)"
    )
    return notes


def _study_notes(spec: StudySpec, estimates: list[dict], workers: int) -> list[str]:
    """The whole study and what its timeout buys: with several choices timed, as the space
    draws them alike, and the cheapest and costliest ends."""
    from hpo.train.loop import clock

    high, n = estimates[0]["epochs"][1], len(estimates)
    study = [e["study_s"] for e in estimates]
    mean = sum(study) / n
    if n == 1:
        notes = [
            f"  {spec.n_trials} trials ≈ {clock(mean)} with {workers} at a time (unpruned; "
            "pruning ends many sooner)"
        ]
    else:
        notes = [
            f"  {spec.n_trials} trials ≈ {clock(mean)} with {workers} at a time, drawing these "
            f"{n} choices alike ({clock(min(study))} if every trial drew the cheapest, "
            f"{clock(max(study))} the costliest; unpruned: pruning ends many sooner)"
        ]
    if spec.timeout:
        longest = sum(e["trial_s"][1] for e in estimates) / n
        fits = int(spec.timeout * workers // longest)
        fewest, most = (
            min(e["timeout_trials"] for e in estimates),
            max(e["timeout_trials"] for e in estimates),
        )
        ends = f"; {fewest} of the costliest choice, {most} of the cheapest" if n > 1 else ""
        notes.append(
            f"  timeout {clock(spec.timeout)}: about {fits} trials of {high} epochs fit "
            f"({fits / spec.n_trials:.0%} of n_trials{ends})"
        )
    if spec.fidelity:
        notes.append(_fidelity_check_note(spec, estimates, workers))
    return notes


def _fidelity_check_note(spec: StudySpec, estimates: list[dict], workers: int) -> str:
    """What the low fidelity's check costs before screening can start: ``check`` full runs
    and their twins on ``train_share`` of the posts (validation and set-up stay whole), at the
    middle of the searched epochs; and whether the time budget leaves room for it."""
    from hpo.train.loop import clock

    fidelity, n = spec.fidelity, len(estimates)
    epochs = sum(estimates[0]["epochs"]) / 2

    def run_s(share: float) -> float:
        return (
            sum(
                e["setup_s"] + epochs * (share * e["epoch_train_s"] + e["epoch_validation_s"])
                for e in estimates
            )
            / n
        )

    full, low = run_s(1.0), run_s(fidelity.train_share)
    check_s = fidelity.check * (full + low) / workers
    said = (
        f"  fidelity check: {fidelity.check} full runs and their twins on "
        f"{fidelity.train_share:.0%} of the training posts ≈ {clock(check_s)} with {workers} at "
        f"a time (a screened run ≈ {low / full:.2f} of a full one)"
    )
    if spec.timeout and check_s >= spec.timeout:
        return (
            f"{said}; longer than the timeout {clock(spec.timeout)}: screening would never "
            "start and every trial stays a full run (lower fidelity.check or raise the timeout)"
        )
    return f"{said}; screening starts after it"


def plan_search_notes(spec: StudySpec, trial_s: float, workers: int) -> list[str]:
    """What an ``auto`` study will do with the budget this estimate buys, and why (its
    creation reads the recorded cost and decides the same way)."""
    from hpo.study.search import plan_search

    return plan_search(spec, trial_s, workers).describe()
