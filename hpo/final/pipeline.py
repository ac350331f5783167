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
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from hpo.attributes import FINAL_ATTR, N_TRIALS_ATTR
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
from hpo.final.options import FinalizeOptions
from hpo.final.plan import (
    better_since,
    plan,
    plan_lines,
    require_a_completed_trial,
    threshold_rule,
)
from hpo.final.record import headline, record, test_figure
from hpo.final.retrain import Run, retrain_all, rounded, train_config
from hpo.final.summary import FinalSummary, RefitRecord, SearchState, TestScores
from hpo.outputs import atomic_text, confined, confined_tree, write_json
from hpo.spec import StudySpec
from hpo.storage_url import StorageUrl
from hpo.study import check_spec
from hpo.study.records import (
    is_spec_file,
    load_existing_study,
    load_spec_ref,
    spec_document,
    study_uid,
    trial_census,
)
from hpo.study.search import first_look_epochs, study_deadline, time_budget_spent
from hpo.study.storage import study_lock
from hpo.tracking import Tracker
from hpo.train.config import TrainConfig
from hpo.vocabulary import REFIT_WITH_VALIDATION

SPEC_FILE = "spec.json"  # in runs/: the spec the retraining children read
LEADS_OUT = "finalize writes and deletes only inside it: remove the symlink that leads out"

__all__ = ["FINAL_ATTR", "Run", "finalize", "plan"]


def finalize(
    spec_path: str,
    overrides,
    storage: str | None,
    options: FinalizeOptions,
    say: Callable[[str], None] | None = None,
) -> FinalSummary:
    """Finalize the study of ``spec_path`` (a file, or the study's name) as ``options`` say;
    their choices left None take their defaults, and where given are named as ignored when
    the study was finalized already with others. ``say``: where finalize's own lines go
    (None: standard output, flushed)."""
    say = say or _print_now
    settings = options.settings()
    top_k, seeds, refit, ensemble, cv = (
        settings.top_k,
        settings.seeds,
        settings.refit,
        settings.ensemble,
        settings.cv,
    )
    if not is_spec_file(spec_path):  # by name: before its recorded places are confirmed
        require_a_completed_trial(load_existing_study(spec_path, StorageUrl.resolve(storage)))
    # a file, or a study's name: its recorded spec, --set flags and all
    spec = load_spec_ref(spec_path, overrides, storage)
    study = load_existing_study(spec.name, spec.storage)
    require_a_completed_trial(study)
    study_folder = spec.study_dir(study_uid(study) or "")
    final_dir = study_folder / "final"
    runs_dir = final_dir / "runs"
    # everything finalize writes or deletes (its lock, final/, the runs, the model) lies there
    confined(study_folder, spec.output_dir, LEADS_OUT)
    confined_tree(final_dir, spec.output_dir, LEADS_OUT)
    with study_lock(
        study, "finalize", study_folder
    ) as lock:  # a second finalize of the study exits at once
        if (
            final_dir / "metrics.json"
        ).exists():  # the test split is scored once: a finished finalize is only read
            return _finalized(spec, study, final_dir, options, say)
        check_spec(study, spec, _spec_fix(spec, spec_path, overrides))
        search = _search_state(study, spec, options.partial)
        runs = plan(spec, study, top_k, seeds)
        # before hours of retraining
        planned = train_config(spec, runs[0].params, runs[0].seed, None)
        _require_splits(planned, cv)
        rule = threshold_rule(cv, planned.threshold)  # before any score is seen
        for line in plan_lines(spec, study, runs, settings, options.workers, rule):
            say(line)
        # only now: torch and transformers take seconds to import (25 s on a busy 2-core
        # machine), and the plan is worth reading meanwhile
        from hpo.final import choose
        from hpo.final.holdout import score_on_test
        from hpo.models.loading import hide_progress_bars

        if not options.progress:
            hide_progress_bars()  # transformers' too, where the retrainings run in this process
        retrain = functools.partial(
            retrain_all,
            spec,
            *_spec_for_children(spec, runs_dir),
            runs_dir=runs_dir,
            workers=options.workers,
            progress=options.progress,
            say=say,
            threads=options.threads,
        )
        if lost := forget_lost_models(runs_dir):
            say(f"retraining {', '.join(lost)} again: their models were in a deleted final/model")
        forget_other_folds(runs_dir, cv, say)
        configurations, chosen = choose.by_mean_validation(spec, runs, retrain(runs))
        best = configurations[0]
        folds = choose.cross_validate(spec, best, cv, retrain, runs_dir, say) if cv else None
        config = train_config(spec, chosen.params, chosen.seed, None)
        chosen = chosen.model_copy(update={"threshold": config.threshold})
        members = (
            {s.run: runs_dir / s.run / "model" for s in best.seeds}
            if ensemble == "seeds" and seeds > 1
            else {chosen.run: runs_dir / chosen.run / "model"}
        )
        decided = choose.decide(spec, config, configurations, chosen, folds, members, rule, say)
        if refit == REFIT_WITH_VALIDATION:
            config, refitted = choose.refit(config, chosen, final_dir / "refit", say)
            members = {"refit": refitted}
        model_dir = place(final_dir, members, decided.thresholds, decided.tuned)  # one copy
        lock.confirm()  # the test split is scored by one finalize only
        tested = score_on_test(config, model_dir)
        summary = FinalSummary(
            study=spec.name,
            metric=spec.metric,
            direction=spec.direction,
            configurations=configurations,
            chosen=decided.chosen,
            cv=folds,
            thresholds=decided.decision,
            ensemble=decided.ensemble,
            refit=RefitRecord(
                on=refit, epochs=config.epochs if refit == REFIT_WITH_VALIDATION else None
            ),
            test=TestScores(
                metrics=rounded(tested.metrics),  # at the decision thresholds
                intervals=tested.intervals,
                per_symptom=tested.per_symptom,
                thresholds=tested.thresholds,
            ),
            split_sizes=tested.split_sizes,
            data_fingerprint=files_fingerprint(spec.data_dir)[:16],
            settings=settings,
            search=search,
            libraries=library_versions(),
            command=command_line(),
            finished=datetime.now(UTC).isoformat(timespec="seconds"),
            model_files=model_files(final_dir / "model"),
        )
        _publish(final_dir, summary)
        record(study, spec, final_dir, summary)
    Tracker(spec.tracking.mlflow, spec.name).log_final_model(
        summary.chosen.params,
        summary.test.metrics,
        {
            "model": final_dir / "model",
            "model_card.md": final_dir / "model_card.md",
            "metrics.json": final_dir / "metrics.json",
        },
    )
    say(
        f"{spec.name}: chose trial {summary.chosen.trial} (validation {spec.metric} "
        + (
            f"{best.mean:.4f} ± {best.sd:.4f} over {seeds} seeds"
            if seeds > 1
            else f"{best.mean:.4f}, one seed"
        )
        + "); test "
        + ", ".join(test_figure(summary.test, name) for name in headline(spec.metric, summary.test))
        + f"; model in {final_dir / 'model'}"
    )
    return summary


def _print_now(line: str) -> None:
    """finalize's own lines, flushed: in a log they come before the retrainings' (stderr)."""
    print(line, flush=True)


def _search_state(study, spec: StudySpec, partial: bool) -> SearchState:
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
    return SearchState(
        n_trials=n_trials,
        finished=census["finished"],
        running=census["running"],
        partial=unfinished,
        ended_by_time_budget=budget_spent and census["finished"] < n_trials,
    )


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
    spec: StudySpec,
    study,
    final_dir: Path,
    options: FinalizeOptions,
    say: Callable[[str], None],
) -> FinalSummary:
    """A finished finalize, read back: its model checked against what metrics.json lists
    (refused where it is missing: it is the only copy),
    the settings asked for now named as ignored where they differ from those it ran with, and
    a better trial the search found since named."""
    summary = FinalSummary.read(final_dir / "metrics.json")
    model = final_dir / "model"
    if not intact(model, summary.model_files or {}):
        raise UsageError(
            f"{spec.name}: finalized, but {model} is missing or incomplete, and it was "
            "the model's only copy; the test split was scored already (metrics.json): "
            f"restore {model} from a copy of yours, or move {final_dir} aside to "
            "finalize anew"
        )
    say(f"{spec.name}: already finalized; the model and its test score are in {final_dir}")
    # a summary from before the settings were recorded: what its parts show
    done = (
        summary.settings.model_dump()
        if summary.settings
        else {
            "top_k": len(summary.configurations),
            "seeds": len(summary.best.seeds),
            "refit": summary.refit_on,
            "ensemble": "seeds" if summary.ensemble else "none",
            "cv": summary.cv.k if summary.cv else 0,
        }
    )
    ignored = [
        f"--{key.replace('_', '-')} {value}"
        for key, value in options.asked().items()
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


def _publish(final_dir: Path, summary: FinalSummary) -> None:
    """model_card.md, then metrics.json (with the model's files and sizes, so a rerun can
    check the model), last, as the mark of a finished finalize."""
    with atomic_text(final_dir / "model_card.md") as stream:
        stream.write(model_card(summary))
    write_json(final_dir / "metrics.json", summary.to_json())
