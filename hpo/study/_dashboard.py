"""optuna-dashboard over a storage, with the artifact store the trials upload to."""

from __future__ import annotations

from pathlib import Path

from hpo.study._storage import get_storage


def serve_dashboard(url: str, artifact_dir: Path, host: str, port: int) -> None:
    """Serve until Ctrl-C; optuna-dashboard is an optional extra, imported only here."""
    from optuna.artifacts import FileSystemArtifactStore
    from optuna_dashboard import run_server

    run_server(get_storage(url), host=host, port=port, artifact_store=FileSystemArtifactStore(str(artifact_dir)))
