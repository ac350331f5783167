"""hpo finalize: from a finished search to one model with an honest test score.

The study's top-k configurations are retrained with several seeds each, on the search's
own split. The configuration with the best mean validation score wins; its seeds' ensemble
(or its best seed's model) is scored ONCE on the test split, at decision thresholds chosen by
a rule fixed from the flags before anything trains (``plan.threshold_rule``: out-of-fold
with --cv, validation-tuned with the spec's threshold: tuned, else 0.5), with bootstrap
intervals over the test posts, and saved under ``<output_dir>/<study>-<uid>/final/`` with
``metrics.json`` and ``model_card.md``, then recorded in the study (user attributes and two
artifacts, for the dashboard).

Every retraining writes ``runs/<trial>-seed<s>/result.json`` when it is done, so a killed
finalize resumes with the unfinished ones only; a finished one is never scored again, and
its retraining processes die with it (``hpo.final.retrain``). One finalize per study at a time:
a lock that the database or the kernel releases when its holder dies. Refused before
anything is retrained: a search still running or short of its n_trials (unless
``--partial``), a spec or data other than the study's, a split without test posts.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from hpo.attributes import FINAL_ATTR, FINAL_SEED_SPREAD_ATTR, FINAL_TEST_ATTR, N_TRIALS_ATTR
from hpo.data import files_fingerprint, load_redsm5, split_posts, symptom_profiles
from hpo.errors import UsageError
from hpo.final.final_folder import (
    forget_lost_models,
    forget_other_folds,
    intact,
    model_files,
    place,
)
from hpo.final.model_card import command_line, library_versions, model_card
from hpo.final.plan import better_since, plan, plan_lines, threshold_rule
from hpo.final.retrain import (
    Run,
    retrain_all,
    rounded,
    train_config,
    write_json,
)
from hpo.outputs import atomic_text
from hpo.spec import StudySpec
from hpo.study import check_spec
from hpo.study.records import (
    artifact_store,
    is_spec_file,
    load_existing_study,
    load_spec_ref,
    spec_document,
    study_uid,
    trial_census,
    upload,
    write_study_note,
)
from hpo.study.search import first_look_epochs, study_deadline, time_budget_spent
from hpo.study.storage import study_lock
from hpo.tracking import Tracker
from hpo.train.config import TrainConfig

SPEC_FILE = "spec.json"  # in runs/: the spec the retraining children read
REFITS = ("train", "train+val")  # the chosen model as retrained, or once more on train + validation
# seeds: the chosen configuration's seeds averaged into one model; none: its best seed alone
ENSEMBLES = ("seeds", "none")
# their flags; cv 0: no cross-validation
DEFAULTS = {"top_k": 3, "seeds": 3, "refit": "train", "ensemble": "seeds", "cv": 0}

__all__ = ["FINAL_ATTR", "Run", "finalize", "plan"]


def finalize(
    spec_path: str,
    overrides,
    storage: str | None,
    top_k: int | None = None,
    seeds: int | None = None,
    workers: int = 1,
    refit: str | None = None,
    ensemble: str | None = None,
    cv: int | None = None,
    partial: bool = False,
    progress: bool = True,
    say: Callable[[str], None] | None = None,
    threads: int | None = None,
) -> dict:
    """``top_k``, ``seeds``, ``refit``, ``ensemble`` and ``cv`` left None take their DEFAULTS;
    given, they are named as ignored when the study was finalized already with others.
    ``threads``: CPU threads per retraining process (None: the cores split between them).
    ``say``: where finalize's own lines go (None: standard output, flushed)."""
    say = say or _print_now
    asked = {"top_k": top_k, "seeds": seeds, "refit": refit, "ensemble": ensemble, "cv": cv}
    settings = {key: DEFAULTS[key] if value is None else value for key, value in asked.items()}
    if refit == "train+val" and ensemble is None:
        settings["ensemble"] = "none"  # the refit retrains one model
    top_k, seeds, refit = settings["top_k"], settings["seeds"], settings["refit"]
    ensemble, cv = settings["ensemble"], settings["cv"]
    if cv == 1 or cv < 0:
        raise UsageError(f"--cv K needs K >= 2 folds (or 0 for none), got {cv}")
    if top_k < 1 or seeds < 1 or workers < 1:
        raise UsageError(
            f"--top-k, --seeds and --workers must be at least 1, got {top_k}, {seeds}, {workers}"
        )
    if refit not in REFITS:
        raise UsageError(f"--refit must be one of {', '.join(REFITS)}, got {refit!r}")
    if ensemble not in ENSEMBLES:
        raise UsageError(f"--ensemble must be one of {', '.join(ENSEMBLES)}, got {ensemble!r}")
    if ensemble != "none" and refit == "train+val":
        raise UsageError(
            "--refit train+val retrains one model, so it cannot be an ensemble; "
            "pass --ensemble none with it, or leave --refit out"
        )
    # a file, or a study's name: its recorded spec, --set flags and all
    spec = load_spec_ref(spec_path, overrides, storage)
    study = load_existing_study(spec.name, spec.storage)
    study_folder = spec.study_dir(study_uid(study) or "")
    final_dir = study_folder / "final"
    with study_lock(
        study, "finalize", study_folder
    ) as lock:  # a second finalize of the study exits at once
        if (
            final_dir / "metrics.json"
        ).exists():  # the test split is scored once: a finished finalize is only read
            return _finalized(spec, study, final_dir, asked, say)
        check_spec(study, spec, _spec_fix(spec, spec_path, overrides))
        search = _search_state(study, spec, partial)
        runs = plan(spec, study, top_k, seeds)
        # before hours of retraining
        planned = train_config(spec, runs[0].params, runs[0].seed, None)
        _require_splits(planned, cv)
        rule = threshold_rule(cv, planned.threshold)  # before any score is seen
        for line in plan_lines(spec, study, runs, settings, workers, rule):
            say(line)
        # only now: torch and transformers take seconds to import (25 s on a busy 2-core
        # machine), and the plan is worth reading meanwhile
        from hpo.final import choose
        from hpo.final.holdout import score_on_test
        from hpo.models.loading import hide_progress_bars

        if not progress:
            hide_progress_bars()  # transformers' too, where the retrainings run in this process
        retrain = functools.partial(
            retrain_all,
            spec,
            *_spec_for_children(spec, final_dir / "runs"),
            runs_dir=final_dir / "runs",
            workers=workers,
            progress=progress,
            say=say,
            threads=threads,
        )
        if lost := forget_lost_models(final_dir / "runs"):
            say(f"retraining {', '.join(lost)} again: their models were in a deleted final/model")
        forget_other_folds(final_dir / "runs", cv, say)
        summary = choose.by_mean_validation(spec, runs, retrain(runs))
        if cv:
            summary["cv"] = choose.cross_validate(
                spec, summary, cv, retrain, final_dir / "runs", say
            )
        chosen = summary["chosen"]
        config = train_config(spec, chosen["params"], chosen["seed"], None)
        chosen["threshold"] = config.threshold
        runs_dir = final_dir / "runs"
        members = (
            {s["run"]: runs_dir / s["run"] / "model" for s in summary["configurations"][0]["seeds"]}
            if ensemble == "seeds" and seeds > 1
            else {chosen["run"]: runs_dir / chosen["run"] / "model"}
        )
        thresholds, tuned = choose.decide(spec, config, summary, members, rule, say)
        if refit == "train+val":
            config, refitted = choose.refit(config, chosen, final_dir / "refit", say)
            members = {"refit": refitted}
        model_dir = place(final_dir, members, thresholds, tuned)  # moved there: one copy
        summary["refit"] = {"on": refit, "epochs": config.epochs if refit == "train+val" else None}
        lock.confirm()  # the test split is scored by one finalize only
        tested = score_on_test(config, model_dir)
        summary |= {
            "test": {
                "metrics": rounded(tested.metrics),  # at the decision thresholds
                "intervals": tested.intervals,
                "per_symptom": tested.per_symptom,
                "thresholds": tested.thresholds,
            },
            "split_sizes": tested.split_sizes,
            "data_fingerprint": files_fingerprint(spec.data_dir)[:16],
            "settings": settings,
            "search": search,
            "libraries": library_versions(),
            "command": command_line(),
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        _publish(final_dir, summary)
        _record(study, spec, final_dir, summary)
    Tracker(spec.tracking.mlflow, spec.name).log_final_model(
        chosen["params"],
        summary["test"]["metrics"],
        {
            "model": final_dir / "model",
            "model_card.md": final_dir / "model_card.md",
            "metrics.json": final_dir / "metrics.json",
        },
    )
    say(
        f"{spec.name}: chose trial {chosen['trial']} (validation {spec.metric} "
        f"{summary['configurations'][0]['mean']:.4f}"
        f" ± {summary['configurations'][0]['sd']:.4f} over {seeds} seeds); test "
        f"{test_figure(summary, spec.metric)}; model in {final_dir / 'model'}"
    )
    return summary


def _print_now(line: str) -> None:
    """finalize's own lines, flushed: in a log they come before the retrainings' (stderr)."""
    print(line, flush=True)


def _search_state(study, spec: StudySpec, partial: bool) -> dict:
    """How far the search got; a search still running or short of its n_trials is refused
    unless ``partial``: its best trials may not be the study's. A search its time budget
    (``hpo tune --timeout``) ended is finished: the user chose to stop it there."""
    census = trial_census(study)
    n_trials = study.user_attrs.get(N_TRIALS_ATTR, spec.n_trials)
    # the workers' own rule: no trial starts that the budget left cannot take to its first rung
    budget_spent = (
        time_budget_spent(study, study_deadline(study), first_look_epochs(spec)) is not None
    )
    short = census["finished"] < n_trials and not budget_spent
    unfinished = census["running"] > 0 or short
    if unfinished and not partial:
        raise UsageError(
            f"study {spec.name!r} is not finished: "
            f"{census['finished']} of {n_trials} trials finished, "
            f"{census['running']} running, {census['waiting']} waiting; "
            "let hpo tune finish it, or pass "
            "--partial to finalize from the trials finished so far"
        )
    return {
        "n_trials": n_trials,
        "finished": census["finished"],
        "running": census["running"],
        "partial": unfinished,
        "ended_by_time_budget": budget_spent and census["finished"] < n_trials,
    }


def _spec_fix(spec: StudySpec, spec_path: str, overrides) -> str:
    """What to do about a spec that differs from the study's fingerprint: by the study's name
    only if that is not what was just run, and then what can have changed it."""
    if is_spec_file(spec_path):
        return (
            f"finalize by the study's name (hpo finalize {spec.name}), or with the spec, --set "
            "flags and data it was tuned with"
        )
    changed = "a --set flag here changes it, " if overrides else ""
    return (
        "the spec recorded in the study no longer describes what it was tuned with "
        f"({changed}the files under data_dir changed since, or the record was edited in its "
        "database); finalize with the YAML, --set flags and data it was tuned with"
    )


def _spec_for_children(spec: StudySpec, runs_dir: Path) -> tuple[str, tuple[()]]:
    """The spec as finalize resolved it (from a file and --set flags, or from the study), in a
    file for ``hpo retrain`` children: JSON is YAML, so they read it as a study file, without
    opening the study; their storage comes from $HPO_STORAGE."""
    path = runs_dir / SPEC_FILE
    write_json(path, spec_document(spec))
    return str(path), ()


def _require_splits(config: TrainConfig, cv: int) -> None:
    """A test split to score, and (--cv K) at least K train + validation posts to fold."""
    corpus = load_redsm5(config.data_dir)
    split = split_posts(symptom_profiles(corpus), config.split_fractions, seed=config.split_seed)
    split.require(
        ("train", "validation", "test"),
        config.split_fractions,
        why=" and hpo finalize scores its model there",
    )
    if cv > (pool := len(split.train) + len(split.validation)):
        raise UsageError(f"--cv {cv}: the train and validation splits hold only {pool} posts")


def _finalized(
    spec: StudySpec, study, final_dir: Path, asked: dict, say: Callable[[str], None]
) -> dict:
    """A finished finalize, read back: its model checked against what metrics.json lists
    (refused where it is missing: it is the only copy),
    the settings asked for now named as ignored where they differ from those it ran with, and
    a better trial the search found since named."""
    summary = json.loads((final_dir / "metrics.json").read_text())
    model = final_dir / "model"
    if not intact(model, summary["model_files"]):
        raise UsageError(
            f"{spec.name}: finalized, but {model} is missing or incomplete, and it was "
            "the model's only copy; the test split was scored already (metrics.json): "
            f"restore {model} from a copy of yours, or move {final_dir} aside to "
            "finalize anew"
        )
    say(f"{spec.name}: already finalized; the model and its test score are in {final_dir}")
    done = {
        "top_k": len(summary["configurations"]),
        "seeds": len(summary["configurations"][0]["seeds"]),
        "refit": summary.get("refit", {}).get("on", "train"),
        "ensemble": "seeds" if summary.get("ensemble") else "none",
        "cv": summary.get("cv", {}).get("k", 0),
        **summary.get("settings", {}),
    }
    ignored = [
        f"--{key.replace('_', '-')} {value}"
        for key, value in asked.items()
        if value is not None and value != done[key]
    ]
    if ignored:
        ran = " ".join(f"--{key.replace('_', '-')} {value}" for key, value in done.items())
        say(
            f"ignored: {', '.join(ignored)}; the study was finalized with {ran} "
            "and its test split is scored once "
            f"(move {final_dir} aside to finalize anew)"
        )
    if better := better_since(spec, study, summary):
        say(f"{better}; move {final_dir} aside to finalize anew")
    return summary


def _publish(final_dir: Path, summary: dict) -> None:
    """metrics.json (with the model's files and sizes, so a rerun can check the model) and
    model_card.md; metrics.json goes last, as the mark of a finished finalize."""
    summary["model_files"] = model_files(final_dir / "model")
    with atomic_text(final_dir / "model_card.md") as stream:
        stream.write(model_card(summary))
    write_json(final_dir / "metrics.json", summary)


def _record(study, spec: StudySpec, final_dir: Path, summary: dict) -> None:
    """The study carries the result, so optuna-dashboard shows it beside the search: the
    summary as one attribute, and the seeds' spread and the test interval as plain lines
    (the dashboard's Study User Attributes table shows a string whole, a dict cut short)."""
    store = artifact_store(spec.output_dir)
    chosen = summary["chosen"]
    best = summary["configurations"][0]
    study.set_user_attr(
        FINAL_ATTR,
        {
            "trial": chosen["trial"],
            "seed": chosen["seed"],  # None: the ensemble of the configuration's seeds
            "ensemble_of": summary.get("ensemble", {}).get("members"),
            "model": str(final_dir / "model"),
            f"validation_{spec.metric}_mean": round(best["mean"], 6),
            f"validation_{spec.metric}_seeds": [round(s["value"], 6) for s in best["seeds"]],
            # every retrained configuration's, so hpo best shows the best trial's own spread
            f"validation_{spec.metric}_seeds_by_trial": {
                str(c["trial"]): [round(s["value"], 6) for s in c["seeds"]]
                for c in summary["configurations"]
            },
            f"test_{spec.metric}": round(_test_value(spec, summary), 6),
            "test_intervals": summary["test"].get("intervals", {}),
            "thresholds": summary.get("thresholds", {}).get("rule"),
            "model_card_artifact": upload(
                store, study, final_dir / "model_card.md", artifact_name("model_card.md", summary)
            ),
            "metrics_artifact": upload(
                store, study, final_dir / "metrics.json", artifact_name("metrics.json", summary)
            ),
        },
    )
    study.set_user_attr(FINAL_SEED_SPREAD_ATTR, seed_spread_line(spec.metric, best))
    study.set_user_attr(FINAL_TEST_ATTR, test_line(summary))
    write_study_note(study, spec)  # the dashboard's study note ends with the chosen model


def artifact_name(file_name: str, summary: dict) -> str:
    """The name the study's artifact of a final's ``file_name`` takes: the chosen trial and
    when finalize finished, so two finalizes of a study (a final moved aside, finalized anew)
    leave two artifacts the dashboard tells apart: model_card-trial3-20261127T145832Z.md."""
    stamp = datetime.fromisoformat(summary["finished"]).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    stem, suffix = file_name.rsplit(".", 1)
    return f"{stem}-trial{summary['chosen']['trial']}-{stamp}.{suffix}"


def seed_spread_line(metric: str, configuration: dict) -> str:
    """The chosen configuration's validation value over its seeds, in one line."""
    values = [s["value"] for s in configuration["seeds"]]
    return (
        f"trial {configuration['trial']}'s configuration, validation {metric} over "
        f"{len(values)} seed(s): {configuration['mean']:.4f} ± {configuration['sd']:.4f} (sd), "
        f"min {min(values):.4f}, max {max(values):.4f}"
    )


def test_line(summary: dict) -> str:
    """The test figures with their intervals, in one line: the study's metric first."""
    test, metric = summary["test"], summary["metric"]
    shown = [
        test_figure(summary, name) for name in dict.fromkeys((metric, *test.get("intervals", {})))
    ]
    rule = summary.get("thresholds", {}).get("rule", "fixed").replace("_", "-")
    return f"test, scored once at {rule} thresholds: " + "; ".join(shown)


def test_figure(summary: dict, name: str) -> str:
    """``name``'s test value, with its interval where it has one."""
    value = summary["test"]["metrics"][name]
    if not (interval := summary["test"].get("intervals", {}).get(name)):
        return f"{name} {value:.4f}"
    return (
        f"{name} {value:.4f} (95% CI {interval['low']:.4f}-{interval['high']:.4f}, "
        f"{interval['posts']} posts)"
    )


def _test_value(spec: StudySpec, summary: dict) -> float:
    """The test score at the model's decision thresholds."""
    # the test metrics are at the decision thresholds; a summary written before they were
    # holds tuned_ twins at the validation thresholds, which threshold: tuned decided at
    from hpo.train.evaluate import objective_value  # torch: imported by finalize's scoring

    return objective_value(summary["test"]["metrics"], spec.metric, summary["chosen"]["threshold"])
