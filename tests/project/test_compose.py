"""docker/compose.yaml, docker/Dockerfile and .dockerignore checked statically (no Docker
engine): every hpo command and flag exists, every variable is documented, and the wiring
between services (volumes, ports, storage URL, health) is consistent."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import sqlalchemy as sa
import yaml

from hpo.spec import load_spec
from tests.support import REPO

COMPOSE_FILE = REPO / "docker" / "compose.yaml"
DOCKERFILE = REPO / "docker" / "Dockerfile"
COMPOSE_TEXT = COMPOSE_FILE.read_text()
COMPOSE = yaml.safe_load(COMPOSE_TEXT)
SERVICES = COMPOSE["services"]
# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}; $${VAR} is an escaped literal for the
# container's shell.
VARIABLE = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}")


def _defaults(text: str) -> str:
    """``text`` as Compose interpolates it with no variable set."""
    return VARIABLE.sub(lambda m: m.group(3) if m.group(2) in (":-", "-") else "", text)


def _hpo_services() -> dict[str, dict]:
    return {
        name: service
        for name, service in SERVICES.items()
        if isinstance(service.get("build"), dict)
        and service["build"].get("dockerfile") == "docker/Dockerfile"
    }


HPO_SERVICES = _hpo_services()


def _flag_value(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(
        r"\\\n",
        " ",
        "\n".join(
            line
            for line in DOCKERFILE.read_text().splitlines()
            if not line.lstrip().startswith("#")
        ),
    )
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line.strip() else "")
        for line in joined.splitlines()
        if line.strip()
    ]


def test_the_hpo_image_serves_workers_gpu_workers_and_the_dashboard():
    assert {"worker", "worker-gpu", "dashboard"} <= set(HPO_SERVICES)


@pytest.mark.parametrize("name", sorted(HPO_SERVICES))
def test_service_command_uses_existing_subcommand_and_flags(name):
    command = [_defaults(part) for part in HPO_SERVICES[name]["command"]]
    result = subprocess.run(
        [sys.executable, "-m", "hpo", command[0], "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert result.returncode == 0, f"{name}: `hpo {command[0]}` does not exist: {result.stderr}"
    for flag in (part for part in command if part.startswith("--")):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", result.stdout), (
            f"{name}: `hpo {command[0]}` has no flag {flag}"
        )


@pytest.mark.parametrize(
    "name", sorted(n for n, s in HPO_SERVICES.items() if s["command"][0] in ("worker", "tune"))
)
def test_worker_default_study_and_overrides_are_valid(name):
    command = [_defaults(part) for part in HPO_SERVICES[name]["command"]]
    overrides = [command[i + 1] for i, part in enumerate(command) if part == "--set"]
    spec = load_spec(REPO / command[1], overrides, storage="sqlite:///unused.db")
    assert spec.output_dir == "/runs"
    assert (REPO / command[1]).is_relative_to(REPO / "studies"), "the image ships studies/ only"
    assert spec.data_dir == "data/redsm5", "the data bind mount is /app/data/redsm5"


def test_every_variable_is_documented_in_the_docker_section_of_the_operations_guide():
    readme = (REPO / "docs" / "operations.md").read_text()
    match = re.search(r"^## Docker\n(.*?)(?=^## |\Z)", readme, flags=re.S | re.M)
    assert match, "docs/operations.md needs a '## Docker' section"
    variables = sorted({m.group(1) for m in VARIABLE.finditer(COMPOSE_TEXT)})
    assert variables
    missing = [v for v in variables if not re.search(rf"^\|\s*`{v}`", match.group(1), flags=re.M)]
    assert not missing, f"not in docs/operations.md's Docker variable table: {missing}"


def test_named_volumes_are_declared():
    declared = set(COMPOSE.get("volumes") or {})
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = (
                volume.get("source")
                if isinstance(volume, dict)
                else _defaults(volume).split(":")[0]
            )
            if isinstance(volume, dict) and volume.get("type") != "volume":
                continue
            if source and not source.startswith((".", "/", "~")):
                assert source in declared, f"{name}: volume {source!r} is not declared at top level"


def test_dashboard_port_mapping_targets_the_port_it_listens_on():
    dashboard = SERVICES["dashboard"]
    port = _flag_value(dashboard["command"], "--port")
    # reachable through the published port
    assert _flag_value(dashboard["command"], "--host") == "0.0.0.0"
    published = [_defaults(str(p)) for p in dashboard["ports"]]
    assert [p.rsplit(":", 1)[1] for p in published] == [port]
    assert all(p.startswith("127.0.0.1:") for p in published), (
        "the dashboard has no login: this machine only"
    )
    assert _flag_value(dashboard["command"], "--artifact-dir").startswith("/runs/")
    assert any(str(v).startswith("runs:/runs") for v in dashboard["volumes"])


def test_workers_wait_for_a_healthy_postgres():
    assert "pg_isready" in " ".join(SERVICES["postgres"]["healthcheck"]["test"])
    for name in ("worker", "worker-gpu", "dashboard"):
        assert SERVICES[name]["depends_on"]["postgres"]["condition"] == "service_healthy", name


def _postgres_port() -> int:
    postgres = SERVICES["postgres"]
    command = postgres.get("command") or []
    if "-p" in command:
        return int(_flag_value(command, "-p"))
    return int((postgres.get("environment") or {}).get("PGPORT", 5432))


@pytest.mark.parametrize("name", sorted(HPO_SERVICES))
def test_storage_url_points_at_the_postgres_service(name):
    url = sa.make_url(_defaults(HPO_SERVICES[name]["environment"]["HPO_STORAGE"]))
    env = {key: _defaults(value) for key, value in SERVICES["postgres"]["environment"].items()}
    assert (url.get_backend_name(), url.host, url.port) == (
        "postgresql",
        "postgres",
        _postgres_port(),
    )
    assert (url.username, url.password, url.database) == (
        env["POSTGRES_USER"],
        env["POSTGRES_PASSWORD"],
        env["POSTGRES_DB"],
    )
    published = [_defaults(str(p)) for p in SERVICES["postgres"].get("ports", [])]
    assert all(p.rsplit(":", 1)[1] == str(_postgres_port()) for p in published)


def test_workers_scale_restart_and_gpu_profile():
    assert _defaults(str(SERVICES["worker"]["deploy"]["replicas"])).isdigit()
    assert "container_name" not in SERVICES["worker"], "a fixed name forbids --scale"
    assert SERVICES["worker"]["restart"].startswith("on-failure")
    gpu = SERVICES["worker-gpu"]
    assert gpu["profiles"] == ["gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert "BASE_IMAGE" in gpu["build"]["args"] and "cu" in _defaults(
        gpu["build"]["args"]["TORCH_INDEX"]
    )


def test_dockerfile_entrypoint_base_image_arg_and_non_root_user():
    instructions = _dockerfile_instructions()
    entrypoints = [args for kind, args in instructions if kind == "ENTRYPOINT"]
    assert [json.loads(e) for e in entrypoints] == [["hpo"]]
    first_from = next(i for i, (kind, _) in enumerate(instructions) if kind == "FROM")
    assert ("ARG", "BASE_IMAGE=python:3.11-slim") in instructions[:first_from]
    assert instructions[first_from][1].startswith("${BASE_IMAGE}")
    users = [args for kind, args in instructions if kind == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("WORKDIR", "/app") in instructions
    for kind, args in instructions:
        if kind == "COPY":
            for source in args.split()[:-1]:
                assert (REPO / source).exists(), f"COPY {source}: not in the repository"


def test_dockerfile_never_installs_torch_from_pypi():
    """A CPU image must not pull CUDA wheels: torch only with a pinned default and an index."""
    instructions = _dockerfile_instructions()
    args = dict(a.split("=", 1) for kind, a in instructions if kind == "ARG" and "=" in a)
    assert args["TORCH_SPEC"].startswith("torch==")
    assert args["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    runs = [a for kind, a in instructions if kind == "RUN" and "pip install" in a]
    torch_runs = [i for i, a in enumerate(runs) if re.search(r"\btorch\b|TORCH_SPEC", a)]
    assert torch_runs, "torch is installed explicitly"
    for i in torch_runs:
        assert "--index-url" in runs[i] and "--extra-index-url" not in runs[i], runs[i]
    project = next(i for i, a in enumerate(runs) if re.search(r"pip install \"?\.\[", a))
    assert max(torch_runs) < project, (
        "torch goes first, so the project's bare `torch` is already satisfied"
    )


def test_dockerignore_excludes_local_state():
    patterns = {
        line.strip().rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".venv", "_runs", ".git", "data"} <= patterns
    assert not {"hpo", "studies", "pyproject.toml", "README.md"} & patterns
