"""``hpo dashboard``: optuna-dashboard on a study's storage (named by the study, its file, or a
storage URL), with the artifact store, until Ctrl-C."""

from __future__ import annotations

from hpo.cli._common import _port, add_storage_arg


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "dashboard", help="optuna-dashboard on the storage, with the artifact store"
    )
    parser.add_argument(
        "target",
        nargs="?",
        help="a study name (on --storage, $HPO_STORAGE or the default), its YAML file, or a "
        "storage URL (default $HPO_STORAGE)",
    )
    add_storage_arg(parser)
    parser.add_argument("--artifact-dir", help="artifact store (default <output_dir>/artifacts)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    parser.add_argument("--port", type=_port, default=8080)
    parser.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from hpo.spec import DEFAULT_OUTPUT_DIR, load_spec
    from hpo.storage_url import StorageUrl
    from hpo.study import serve_dashboard
    from hpo.study.records import ARTIFACT_DIR, load_existing_study, recorded_spec

    output_dir = DEFAULT_OUTPUT_DIR
    if args.target and args.target.endswith((".yaml", ".yml")):
        spec = load_spec(args.target, (), args.storage)
        url, output_dir = spec.storage, spec.output_dir
    elif args.target and not StorageUrl.of(args.target).scheme:  # a study's name
        url = StorageUrl.resolve(args.storage)
        spec = recorded_spec(load_existing_study(args.target, url), url)
        output_dir = spec.output_dir if spec else DEFAULT_OUTPUT_DIR
    else:
        url = StorageUrl.resolve(args.storage or args.target)
    artifacts = Path(args.artifact_dir or Path(output_dir) / ARTIFACT_DIR)
    serve_dashboard(
        url,
        artifacts,
        host=args.host,
        port=args.port,
        ready=lambda: print(
            f"optuna-dashboard for {url} at http://{args.host}:{args.port}/ "
            f"(artifacts: {artifacts}); "
            "Ctrl-C stops it"
        ),
    )
    return 0
