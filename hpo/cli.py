"""The ``hpo`` command: parses arguments and calls one function per subcommand."""

from __future__ import annotations

import argparse
import os
import sys

from hpo.errors import UsageError

DEFAULT_CPUS_PER_WORKER = 4  # a tiny-to-base encoder's trial rarely speeds up past 4 CPU threads


def _make_tiny_encoder(args) -> None:
    from hpo.fixtures import make_tiny_encoder

    path = make_tiny_encoder(args.arch, args.out_dir, masked_lm=args.masked_lm, seed=args.seed, force=args.force)
    print(f"wrote a tiny {args.arch} encoder to {path}")


def _data_sample(args) -> None:
    from hpo.fixtures import write_sample

    path = write_sample(args.out_dir, posts=args.posts, seed=args.seed, profile=args.profile, force=args.force)
    print(f"wrote {args.posts} {args.profile} sample posts to {path}")


def _tune(args) -> int:
    from hpo.commands import tune

    overrides = [*args.overrides, *([f"timeout={args.timeout}"] if args.timeout else [])]
    code, result = tune(args.spec, overrides, args.storage, args.workers, args.restart_dead,
                        progress=not args.no_progress, allow_spec_change=args.allow_spec_change,
                        threads=args.threads, memory_per_worker_mb=args.memory_per_worker)
    if code == 0:
        _print_best(result["best"], result["study"])
    return code


def _submit(args) -> None:
    from hpo.commands import submit_slurm

    submitted = submit_slurm(args.spec, args.overrides, args.storage, args.workers, args.cpus_per_worker,
                             args.gpus_per_worker, args.partition, args.time, args.allow_spec_change)
    print(f"watch it: hpo status {args.spec}   |   squeue -j {submitted.job_id}")


def _finalize(args) -> None:
    from hpo.finalize.pipeline import finalize

    finalize(args.spec, args.overrides, args.storage, top_k=args.top_k, seeds=args.seeds, workers=args.workers,
             refit=args.refit, partial=args.partial, progress=not args.no_progress)


def _retrain(args) -> int:
    from hpo.finalize.retrain import retrain_child

    return retrain_child(args.spec, args.overrides, args.runs_dir, args.threads, args.parent_pid, args.memory_limit)


def _worker(args) -> int:
    from hpo.commands import worker

    return worker(args.spec, args.overrides, args.storage, args.name, args.threads, args.parent_pid,
                  allow_spec_change=args.allow_spec_change, wait_for_go=args.await_go,
                  memory_limit_mb=args.memory_limit)


def _validate(args) -> None:
    from hpo.commands import validate

    result = validate(args.spec, args.overrides, args.storage)
    for note in result.notes:
        print(f"  {note}")
    print(result.summary)


def _enqueue(args) -> None:
    from hpo.commands import enqueue

    print(enqueue(args.spec, args.params, args.storage, allow_spec_change=args.allow_spec_change))


def _status(args) -> None:
    from hpo.commands import status

    s = status(args.study, args.storage)
    counts = s["counts"]
    print(f"study {s['study']} ({s['task']}, {s['direction']} {s['metric']})")
    print("  " + "  ".join(f"{k}={counts[k]}" for k in ("complete", "pruned", "failed", "running", "waiting")))
    best = "-" if counts["best"] is None else counts["best"]
    print(f"  finished {counts['finished']}/{s['n_trials'] or '?'}   best {best}")
    if s["trials_per_hour"]:
        eta = f"   ETA {_duration(s['eta_hours'])}" if s["eta_hours"] else ""
        print(f"  {s['trials_per_hour']:.1f} trials/hour{eta}")
    if (left := s["budget_seconds_left"]) is not None:
        print(f"  time budget: {_duration(left / 3600) + ' left' if left > 0 else 'spent'}")
    for trial in s["running"]:
        where = (f"epoch {trial['epoch']}/{trial['epochs']} step {trial['step']}/{trial['steps']}, ETA "
                 f"{_duration(trial['eta_seconds'] / 3600)}" if "epoch" in trial else "starting")
        print(f"  trial {trial['number']} running on {trial['worker'] or '?'}: {where}")


def _duration(hours: float) -> str:
    """In the unit that shows it: "ETA 0.0 h" with 23 trials left told the user nothing."""
    if hours >= 1:
        return f"{hours:.1f} h"
    if hours * 60 >= 1:
        return f"{hours * 60:.0f} min"
    return f"{max(hours * 3600, 1):.0f} s"


def _best(args) -> None:
    from hpo.commands import best

    result = best(args.study, args.storage)
    _print_best(result["best"], result["study"])


def _print_best(best: dict | None, study: str) -> None:
    if best is None:
        print(f"study {study} has no completed trial yet")
        return
    print(f"best trial {best['number']}: {best['metric']} = {best['value']:.4f}")
    print("  params: " + ", ".join(f"{k}={v}" for k, v in best["params"].items()))
    if best["metrics"]:
        print("  metrics: " + ", ".join(f"{k}={v:.4f}" for k, v in best["metrics"].items()))
    if best["checkpoint"]:
        print(f"  checkpoint: {best['checkpoint']}")
    elif best["checkpoint_refused"]:
        print(f"  {best['checkpoint_refused']}")


def _export(args) -> None:
    from hpo.commands import export, write_export

    text, count = export(args.study, args.storage, args.format)
    if not args.out:
        sys.stdout.write(text)
        return
    write_export(args.out, text, args.study)
    print(f"wrote {count} trials to {args.out}", file=sys.stderr)


def _predict(args) -> None:
    from hpo.commands import predict

    if args.criteria or args.evidence or args.html:
        return _predict_pair(args)
    if not args.model_dir:
        raise UsageError("hpo predict needs a model folder, or --criteria and --evidence for the joined prediction")
    s = predict(args.model_dir, args.input, args.out, args.batch_size, args.device, args.top_k,
                progress=not args.no_progress, force=args.force)
    print(f"predicted {s.posts} posts in {s.predict_seconds:.1f} s ({s.posts_per_second:.1f} posts/s; loading took "
          f"{s.load_seconds:.1f} s): {s.rows} rows of {s.task} predictions in {args.out}", file=sys.stderr)


def _predict_pair(args) -> None:
    from hpo.commands import explain

    if args.model_dir:
        raise UsageError(f"give either a model folder ({args.model_dir}) or --criteria and --evidence, not both")
    if not (args.criteria and args.evidence):
        given, missing = ("--criteria", "--evidence") if args.criteria else ("--evidence", "--criteria")
        if not (args.criteria or args.evidence):
            raise UsageError("--html needs the joined prediction: pass --criteria and --evidence model folders")
        raise UsageError(f"{given} needs {missing} too: pass the criteria study's final/model and the evidence "
                         "study's final/model")
    s = explain(args.criteria, args.evidence, args.input, args.out, args.html, args.batch_size, args.device,
                args.top_k, progress=not args.no_progress, force=args.force)
    if s.unchecked_data:
        print(f"hpo: warning: {s.unchecked_data}", file=sys.stderr)
    report = f" and the report in {args.html}" if args.html else ""
    print(f"explained {s.posts} posts in {s.criteria_seconds + s.evidence_seconds:.1f} s ({s.posts_per_second:.1f} "
          f"posts/s; criteria {s.criteria_seconds:.1f} s, evidence {s.evidence_seconds:.1f} s for {s.found} "
          f"symptoms found; loading took {s.load_seconds:.1f} s): {args.out}{report}", file=sys.stderr)


def _report(args) -> None:
    from hpo.report import report

    for path in report(args.study, args.storage, args.out):
        print(path)


def _dashboard(args) -> None:
    from hpo.commands import dashboard

    dashboard(args.target, args.storage, args.artifact_dir, args.host, args.port)


def _storage_proxy(args) -> None:
    from hpo.run.proxy import serve

    serve(args.storage, args.host, args.port, args.sweep_seconds, args.max_trial_seconds)


def _spec_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="study YAML file, e.g. studies/criteria-smoke.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a spec setting, e.g. --set n_trials=20 --set train.epochs=2 (repeatable)")
    _storage_arg(parser)


def _spec_change_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-spec-change", action="store_true",
                        help="join a study created from a different spec (search space, task, metric, n_trials "
                             "or data) and record this spec as its own; without it such a run is refused")


def _storage_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", help="storage URL (beats $HPO_STORAGE and the spec); default sqlite:///_runs/hpo.db")


class _OneLineErrors(argparse.ArgumentParser):
    """Usage errors as one line naming the problem and where to look, exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrors(prog="hpo", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_OneLineErrors)

    tune = commands.add_parser("tune", help="run a study with N worker processes and a progress bar")
    _spec_args(tune)
    tune.add_argument("--workers", type=_positive_int, default=1, help="parallel worker processes (default 1)")
    tune.add_argument("--threads", type=_thread_count,
                      help="torch CPU threads per worker (default: the cores split evenly between workers)")
    tune.add_argument("--restart-dead", action="store_true", help="replace a worker that dies")
    tune.add_argument("--timeout", type=_seconds, metavar="DURATION",
                      help="wall-clock budget, e.g. 90m or 2h: no trial starts that the rest cannot fit (the study's "
                           "median trial), running ones end at their next epoch's end and are kept")
    tune.add_argument("--memory-per-worker", type=_memory_mb, metavar="SIZE",
                      help="host-memory ceiling per worker, e.g. 6G or 6000M: a step that would cross it backs off "
                           "like a GPU out-of-memory (default: 90%% of this machine's memory split between workers)")
    _spec_change_arg(tune)
    tune.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    tune.set_defaults(func=_tune)

    submit = commands.add_parser("submit", help="create the study, then run its workers as a Slurm job array")
    _spec_args(submit)
    submit.add_argument("--slurm", action="store_true", required=True,
                        help="submit with sbatch (the only scheduler so far)")
    submit.add_argument("--workers", type=_positive_int, required=True, help="array tasks, one worker each")
    submit.add_argument("--cpus-per-worker", type=_positive_int, default=DEFAULT_CPUS_PER_WORKER,
                        help=f"cores per task; the worker's torch threads (default {DEFAULT_CPUS_PER_WORKER})")
    submit.add_argument("--gpus-per-worker", type=_non_negative_int, default=0,
                        help="GPUs per task (--gres=gpu:G; default 0)")
    submit.add_argument("--partition", help="Slurm partition (default: the cluster's)")
    submit.add_argument("--time", help="time limit per task, e.g. 12:00:00; a minute before it the worker "
                        "re-queues its running trial and exits")
    _spec_change_arg(submit)
    submit.set_defaults(func=_submit)

    final = commands.add_parser("finalize", help="retrain the best configurations with several seeds, choose one "
                                "on validation, score it once on the test split, save it with a model card")
    _spec_args(final)
    # --top-k, --seeds, --refit: None when not given, so a rerun of a finalized study names those it ignores
    final.add_argument("--top-k", type=_positive_int, help="configurations to retrain (default 3)")
    final.add_argument("--seeds", type=_positive_int, help="seeds per configuration (default 3)")
    final.add_argument("--workers", type=_positive_int, default=1, help="parallel retrainings (default 1)")
    final.add_argument("--refit", choices=("train", "train+val"),
                       help="train: the chosen seed's model as retrained (default); train+val: retrain it once "
                            "more on train + validation for its best epoch count, at the thresholds it chose")
    final.add_argument("--partial", action="store_true",
                       help="finalize a search that is still running or short of n_trials, from its finished trials")
    final.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    final.set_defaults(func=_finalize)

    # finalize's retraining processes (hpo/finalize/retrain.py); not listed: finalize starts them
    retrain = commands.add_parser("retrain")
    _spec_args(retrain)
    retrain.add_argument("--runs-dir", required=True, help="finalize's runs/ folder, holding plan.json")
    retrain.add_argument("--threads", type=_positive_int, required=True, help="torch CPU threads")
    retrain.add_argument("--parent-pid", type=_positive_int, required=True, metavar="PID",
                         help="the finalize process: this one gets SIGTERM when it exits")
    retrain.add_argument("--memory-limit", type=_memory_mb, metavar="SIZE", help="host-memory ceiling of this process")
    retrain.set_defaults(func=_retrain)

    worker = commands.add_parser("worker", help="run one worker on a study (e.g. on another machine)")
    _spec_args(worker)
    worker.add_argument("--name", help="worker name in logs and trial attributes (default host/pid)")
    worker.add_argument("--threads", type=_thread_count, help="torch CPU threads for this worker")
    _spec_change_arg(worker)
    worker.add_argument("--parent-pid", type=_positive_int, metavar="PID",
                        help="stop (re-queueing the running trial) when process PID exits; hpo tune passes its own")
    worker.add_argument("--memory-limit", type=_memory_mb, metavar="SIZE",
                        help="host-memory ceiling of this worker, e.g. 6G (default: 90%% of this machine's memory)")
    worker.add_argument("--await-go", action="store_true",
                        help="load the libraries, then start only once a line 'go' arrives on stdin (hpo tune sends it)")
    worker.set_defaults(func=_worker)

    validate = commands.add_parser("validate", help="check a study file, its data and encoders; creates nothing")
    _spec_args(validate)
    validate.set_defaults(func=_validate)

    enqueue = commands.add_parser("enqueue", help="queue one parameter set by hand on a spec's study")
    enqueue.add_argument("spec", help="study YAML file, e.g. studies/criteria-supermax.yaml")
    enqueue.add_argument("--set", dest="params", action="append", required=True, metavar="KEY=VALUE",
                         help="a searched parameter's value, e.g. --set learning_rate=2e-5 (repeatable); "
                              "parameters left out are sampled")
    _storage_arg(enqueue)
    enqueue.add_argument("--allow-spec-change", action="store_true",
                         help="queue onto a study created from a different spec; the study keeps its own spec")
    enqueue.set_defaults(func=_enqueue)

    for name, func, text in (("status", _status, "trial counts, best value, trials/hour and ETA"),
                             ("best", _best, "the best trial's parameters, metrics and checkpoint")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("study", help="study name, or its YAML file")
        _storage_arg(sub)
        sub.set_defaults(func=func)

    export = commands.add_parser("export", help="every trial as CSV or JSON")
    export.add_argument("study", help="study name, or its YAML file")
    _storage_arg(export)
    export.add_argument("--format", choices=["csv", "json"], default="csv")
    export.add_argument("--out", help="file to write (default: standard output)")
    export.set_defaults(func=_export)

    pred = commands.add_parser("predict", help="run a saved model (a trial checkpoint or a final model) on posts, "
                               "or a criteria and an evidence model together")
    pred.add_argument("model_dir", nargs="?", help="the model folder: a trial's checkpoint/ or finalize's model")
    pred.add_argument("--criteria", help="joined prediction: the criteria study's final/model; needs --evidence")
    pred.add_argument("--evidence", help="joined prediction: the evidence study's final/model, trained on the same "
                      "data and criterion texts; its top sentences are found for each symptom --criteria finds")
    pred.add_argument("--html", help="joined prediction: also write a self-contained HTML report of the posts")
    pred.add_argument("--input", required=True, help="posts as .csv or .jsonl with post_id and text "
                      "(the layout of ReDSM5's redsm5_posts.csv)")
    pred.add_argument("--out", required=True, help="CSV to write (joined prediction: JSON lines); it appears only "
                      "once complete")
    pred.add_argument("--batch-size", type=_positive_int, default=64, help="sequences per forward pass (default 64)")
    pred.add_argument("--device", default="auto", help="auto (a GPU when there is one), cpu, cuda or cuda:N")
    pred.add_argument("--top-k", type=_non_negative_int, default=3,
                      help="evidence: sentences kept per post and symptom (default 3; 0: all)")
    pred.add_argument("--force", action="store_true", help="replace an existing --out file that is not an earlier "
                      "predictions CSV (never the --input file, the model folder or a database)")
    pred.add_argument("--no-progress", action="store_true", help="no progress bar")
    pred.set_defaults(func=_predict)

    rep = commands.add_parser("report", help="PNG plots and a Markdown summary of a study")
    rep.add_argument("study", help="study name, or its YAML file")
    _storage_arg(rep)
    rep.add_argument("--out", help="folder to write (default _runs/reports/<study>)")
    rep.set_defaults(func=_report)

    dash = commands.add_parser("dashboard", help="optuna-dashboard on the storage, with the artifact store")
    dash.add_argument("target", nargs="?", help="a study YAML file or a storage URL (default $HPO_STORAGE)")
    _storage_arg(dash)
    dash.add_argument("--artifact-dir", help="artifact store (default <output_dir>/artifacts)")
    dash.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    dash.add_argument("--port", type=_port, default=8080)
    dash.set_defaults(func=_dashboard)

    proxy = commands.add_parser("storage-proxy", help="Optuna's gRPC storage proxy in front of the database, "
                                "with a stale-trial sweep (workers use --storage grpc://HOST:PORT)")
    proxy.add_argument("--storage", help="the database URL (default $HPO_STORAGE); postgresql://… or sqlite:///…")
    proxy.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    proxy.add_argument("--port", type=_port, default=13000)
    proxy.add_argument("--sweep-seconds", type=float, default=30,
                       help="how often to fail and re-queue stale RUNNING trials (default 30; 0: never)")
    proxy.add_argument("--max-trial-seconds", type=float, default=86400,
                       help="a RUNNING trial without heartbeats (a client other than hpo) is stale after this "
                            "(default 86400)")
    proxy.set_defaults(func=_storage_proxy)

    tiny = commands.add_parser("make-tiny-encoder", help="build a small real encoder + tokenizer offline")
    tiny.add_argument("out_dir")
    tiny.add_argument("--arch", choices=["roberta", "deberta-v2"], default="roberta")
    tiny.add_argument("--masked-lm", action="store_true", help="save a masked-LM model (tied output layer)")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument("--force", action="store_true", help="replace OUT_DIR and everything in it if it is not empty")
    tiny.set_defaults(func=_make_tiny_encoder)

    data = commands.add_parser("data", help="data utilities").add_subparsers(
        dest="data_command", required=True, parser_class=_OneLineErrors)
    sample = data.add_parser("sample", help="write synthetic data in the ReDSM5 layout")
    sample.add_argument("out_dir")
    sample.add_argument("--posts", type=_positive_int, default=200)
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--profile", choices=("short", "realistic"), default="short",
                        help="short: a few sentences a post, fast (default); realistic: "
                             "lengths, sentence counts and label shares of the real ReDSM5")
    sample.add_argument("--force", action="store_true",
                        help="replace redsm5_posts.csv and redsm5_annotations.csv already in OUT_DIR")
    sample.set_defaults(func=_data_sample)
    return parser


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 1-65535, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _quantity(units: dict[str, float], default: str, example: str, least: float):
    """An argparse type for a number with an optional unit suffix ('6G', '90m'), in the default unit."""
    def parse(text: str) -> float:
        number, unit = (text[:-1], text[-1].upper()) if text[-1:].upper() in units else (text, default)
        try:
            value = float(number) * units[unit]
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number with an optional unit, like {example}; got {text!r}") from None
        if not value >= least:
            raise argparse.ArgumentTypeError(f"must be at least {least:g}{default.lower()}, got {text!r}")
        return value

    return parse


_seconds = _quantity({"S": 1, "M": 60, "H": 3600}, "S", "90m or 2h", 1)  # a duration in seconds


def _memory_mb(text: str) -> int:
    """A memory size in MiB from '6000', '6000M' or '6G'."""
    return int(_quantity({"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}, "M", "6G or 6000M", 1)(text))


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _thread_count(text: str) -> int:
    """Torch threads for a worker on this machine: more than its CPUs only slows it down, and
    100000 exhausts its memory (a MemoryError in every worker)."""
    value, cpus = _positive_int(text), os.cpu_count() or 1
    if value > cpus:
        raise argparse.ArgumentTypeError(f"must be at most {cpus} (this machine's CPUs), got {value}")
    return value


def _quiet_libraries() -> None:
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    try:
        return args.func(args) or 0
    except UsageError as exc:
        print(f"hpo: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # a path the command cannot write (or read): the user's to fix, in one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"hpo: error: {where}{exc.strerror or exc}; check the path and its permissions", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
