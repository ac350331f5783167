"""Secrets and exposure: a storage password never leaves the environment, the dashboard stays
on this machine unless asked, checkpoints are safetensors, and the package has no unsafe
deserialisation or code execution."""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from hpo import outputs
from hpo.fixtures import write_sample
from hpo.models.classifier import load_classifier
from hpo.study.storage import get_storage
from hpo.train.config import TrainConfig
from hpo.train.loop import train
from tests.support import REPO
from tests.support.helpers import free_port, hpo_argv
from tests.support.shared_storage import edit_recorded_spec, read_study
from tests.support.tune_cli import run_tune, tune_assets

PACKAGE = REPO / "hpo"
SECRET = "SuperSecret-4711"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HPO_STORAGE"}
    return {**env, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **extra}


def _secret_url(postgres_url: str) -> str:
    # The local server trusts every connection, so it accepts the password it is given.
    return sa.make_url(postgres_url).set(password=SECRET).render_as_string(hide_password=False)


# --- a real study with a password in the storage URL -------------------------------------


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # after "(comm)": state, then ppid
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _proc_bytes(pid: int, name: str) -> bytes | None:
    try:
        return (Path("/proc") / str(pid) / name).read_bytes()
    except OSError:
        return None


def _watched(cmd: list[str], root: Path, label: str) -> dict:
    """Run ``cmd`` to the end, reading every descendant's command line while it runs, and the
    environment of each child process it starts (`hpo worker`, `hpo retrain`)."""
    cmdlines: dict[int, set[bytes]] = {}  # every command line each process had (fork, then exec)
    environs: dict[int, bytes] = {}  # of the child processes, after their exec
    out_path, err_path = root / f"{label}.out", root / f"{label}.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=root, env=_env(), stdout=out, stderr=err)
        # Until it execs, a forked child still shows this command line: the parent's, not its own.
        parent_line = b"\0".join(part.encode() for part in cmd) + b"\0"
        deadline = time.monotonic() + 300
        while proc.poll() is None:
            # the children (and anything they start), not the command itself
            for pid in _descendants(proc.pid)[1:]:
                line = _proc_bytes(pid, "cmdline")
                if line and line != parent_line and line not in cmdlines.setdefault(pid, set()):
                    cmdlines[pid].add(line)
                    if b"\0worker\0" in line or b"\0retrain\0" in line:
                        environs[pid] = _proc_bytes(pid, "environ") or b""
            if time.monotonic() > deadline:
                proc.kill()
                break
            time.sleep(0.1)
        proc.wait()
    run = {
        "returncode": proc.returncode,
        "stdout": out_path.read_text(),
        "stderr": err_path.read_text(),
        "cmdlines": cmdlines,
        "environs": environs,
    }
    assert run["returncode"] == 0, run["stdout"][-3000:] + run["stderr"][-3000:]
    return run


@pytest.fixture(scope="module")
def secret_study(tmp_path_factory, postgres_url, tiny_roberta, tiny_deberta) -> dict:
    """`hpo tune --set storage=URL-with-password` (2 workers, 2 trials) on PostgreSQL, then
    `hpo finalize --seeds 3` of it (seed 0 is the trial's kept model, seeds 1 and 2 retrain in
    two processes), watching every child process's command
    line while they run; then status, best and export (with --storage)."""
    root = tmp_path_factory.mktemp("secret-study")
    name = f"test-{uuid.uuid4().hex[:12]}"
    url = _secret_url(postgres_url)
    data = write_sample(root / "data", posts=60, seed=0)
    spec = str(REPO / "studies" / "criteria-smoke.yaml")
    sets = [
        # the way issue #34 found the password in `ps`: --set storage=, not --storage
        f"storage={url}",
        f"name={name}",
        f"data_dir={data}",
        f"output_dir={root / 'out'}",
        f"train.cache_dir={root / 'cache'}",
        f"model_paths.tiny-roberta={tiny_roberta}",
        f"model_paths.tiny-deberta={tiny_deberta}",
        "n_trials=2",
        "train.epochs=1",
        # both trials complete: the smoke spec's first look (1/3 epoch) could prune the later one
        "pruner.name=none",
        "pruner.options={}",
    ]
    sets = [arg for item in sets for arg in ("--set", item)]
    tune = _watched(hpo_argv("tune", spec, "--workers", "2", "--no-progress", *sets), root, "tune")
    finalize = _watched(
        hpo_argv(
            "finalize", spec, "--top-k", "1", "--seeds", "3", "--workers", "2", "--no-progress"
        )
        + sets,
        root,
        "finalize",
    )

    commands = (
        ("status", name),
        ("best", name),
        ("export", name, "--format", "json", "--out", str(root / "trials.json")),
        ("export", name, "--format", "csv", "--out", str(root / "trials.csv")),
    )
    procs = {
        " ".join(c[:1] + c[2:4]): subprocess.Popen(  # "status", "export --format json", …
            hpo_argv(*c, "--storage", url),
            cwd=root,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for c in commands
    }
    reads = {}
    for key, read in procs.items():
        stdout, stderr = read.communicate(timeout=120)
        assert read.returncode == 0, f"{key}: {stderr}"
        reads[key] = subprocess.CompletedProcess(read.args, read.returncode, stdout, stderr)
    uid = read_study(name, postgres_url).user_attrs["uid"]
    return {
        "name": name,
        "url": url,
        "root": root,
        "tune": tune,
        "finalize": finalize,
        "reads": reads,
        "study_dir": outputs.study_dir(root / "out", name, uid),
    }


@pytest.mark.slow
@pytest.mark.postgres
def test_password_is_on_no_command_line_it_travels_in_the_environment(secret_study):
    """No password in any child's argv: `hpo tune`'s workers and `hpo finalize`'s retraining
    processes, given the storage by `--set storage=…`, get it in their environment only."""
    for run, child in ((secret_study["tune"], b"worker"), (secret_study["finalize"], b"retrain")):
        cmdlines, environs = run["cmdlines"], run["environs"]
        assert len(environs) >= 2, f"both {child} processes were seen: {list(cmdlines.values())}"
        for pid, line in ((pid, line) for pid, lines in cmdlines.items() for line in lines):
            assert SECRET.encode() not in line, f"password on the command line of {pid}: {line!r}"
        # the URL `hpo tune`/`finalize` resolved from --set storage= (no HPO_STORAGE in theirs)
        for pid, environ in environs.items():
            assert f"HPO_STORAGE={secret_study['url']}".encode() in environ.split(b"\0"), pid


ARGV_SECRET = "postgresql://u:s3cret@db/hpo"


@pytest.mark.parametrize("written", [f"storage={ARGV_SECRET}", f" storage = {ARGV_SECRET}"])
def test_no_child_argv_holds_a_storage_override_its_url_travels_in_the_environment(
    written, tmp_path
):
    """`hpo tune`'s workers, `hpo finalize`'s retrainings and Slurm's job script: the same
    rule (hpo.spec.argv_overrides), the other overrides kept in order."""
    from hpo.final.retrain import child_launches
    from hpo.run.launcher import worker_launches
    from hpo.run.slurm import ArrayJob, job_script

    overrides = ["n_trials=3", written, "train.epochs=1"]
    workers = worker_launches(
        "s.yaml", 2, storage=ARGV_SECRET, overrides=overrides, cpu_count=2, base_env={}
    )
    retrainings = child_launches(
        "s.yaml", overrides, tmp_path, 2, threads=1, storage=ARGV_SECRET, base_env={}
    )
    for cmd, env in [(w.cmd, w.env) for w in workers] + retrainings:
        assert "s3cret" not in " ".join(cmd), cmd
        assert cmd[cmd.index("--set") :] == ["--set", "n_trials=3", "--set", "train.epochs=1"]
        assert env["HPO_STORAGE"] == ARGV_SECRET
    job = ArrayJob(
        spec_path="/s.yaml",
        study="s",
        workers=2,
        cpus_per_worker=1,
        log_dir="/logs",
        workdir="/work",
        python=sys.executable,
        overrides=tuple(overrides),
    )
    script = job_script(job)
    assert "s3cret" not in script and "--set train.epochs=1" in script


@pytest.mark.parametrize(
    "uri", ["http://u:s3cret@mlflow:5000", "https://mlflow:5000/?token=s3cret"]
)
def test_a_tracking_uri_holding_a_secret_is_refused_before_any_child_could_see_it(uri):
    """Any other override travels on the command line and into the recorded spec, so the one
    other URL a spec holds may carry no credentials: exit 2, the fix named, the secret unshown."""
    result = subprocess.run(
        [sys.executable, "-m", "hpo", "validate", str(REPO / "studies" / "criteria-smoke.yaml")]
        + ["--set", f"tracking.mlflow={uri}"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 2, result.stderr
    assert "tracking.mlflow: holds a password or token" in result.stderr
    assert "MLFLOW_TRACKING_PASSWORD" in result.stderr
    assert "s3cret" not in result.stdout + result.stderr


def test_a_tracking_uri_or_path_without_credentials_is_kept():
    from hpo.spec import load_spec

    for uri in ("http://mlflow:5000", "sqlite:///mlflow.db", "mlruns"):
        spec = load_spec(
            REPO / "studies" / "criteria-smoke.yaml", [f"tracking.mlflow={uri}"], env={}
        )
        assert spec.tracking.mlflow == uri


@pytest.mark.parametrize("environment", [{}, {"HPO_STORAGE": "sqlite:///from-env.db"}])
def test_a_child_resolves_the_storage_its_parent_resolved_from_set_storage(environment, tmp_path):
    """--set storage= loses to $HPO_STORAGE, as it always did; whichever wins in the parent is
    what the child, without the override on its command line, reads from its environment."""
    from hpo.run.launcher import worker_launches
    from hpo.spec import load_spec

    spec_path = REPO / "studies" / "criteria-smoke.yaml"
    overrides = [f"storage={ARGV_SECRET}", "n_trials=3"]
    parent = load_spec(spec_path, overrides, env=environment)
    assert parent.storage.text == environment.get("HPO_STORAGE", ARGV_SECRET)
    (launch,) = worker_launches(
        str(spec_path), 1, storage=parent.storage, overrides=overrides, cpu_count=1, base_env={}
    )
    sets = [launch.cmd[i + 1] for i, part in enumerate(launch.cmd) if part == "--set"]
    child = load_spec(spec_path, sets, env=launch.env)
    assert child.storage == parent.storage and child.n_trials == 3


@pytest.mark.slow
@pytest.mark.postgres
def test_password_is_in_no_output_file_or_log(secret_study):
    tune, finalize = secret_study["tune"], secret_study["finalize"]
    assert SECRET not in tune["stdout"] + tune["stderr"] + finalize["stdout"] + finalize["stderr"]
    assert (
        f"study {secret_study['name']!r} on postgresql+psycopg2://postgres:***@" in tune["stdout"]
    )
    files = [p for p in secret_study["root"].rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {
        "train.log",
        "metrics.json",
        "checkpoint.json",
        "head.safetensors",
        "trials.json",
        "trials.csv",
    } <= names, names
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), f"password in {path}"


@pytest.mark.slow
@pytest.mark.postgres
def test_password_is_not_in_status_best_or_export(secret_study):
    reads = secret_study["reads"]
    assert f"study {secret_study['name']}" in reads["status"].stdout
    assert "best trial" in reads["best"].stdout
    for command, run in reads.items():
        assert SECRET not in run.stdout and SECRET not in run.stderr, command


@pytest.mark.slow
@pytest.mark.postgres
def test_password_is_not_in_study_or_trial_attributes(secret_study, postgres_url):
    study = read_study(secret_study["name"], postgres_url)
    assert len(study.trials) >= 2
    # no public getter in Optuna 5
    study_system_attrs = study._storage.get_study_system_attrs(study._study_id)
    recorded = json.dumps(
        [
            study.user_attrs,
            study_system_attrs,
            [(t.user_attrs, t.system_attrs, t.params) for t in study.trials],
        ],
        default=str,
    )
    assert "metrics" in recorded and "spec_file" in recorded
    assert SECRET not in recorded
    assert "://" not in recorded and "postgresql" not in recorded, "no storage URL in attributes"


@pytest.mark.slow
@pytest.mark.postgres
def test_exports_and_metrics_hold_no_storage_url(secret_study):
    root, study_dir = secret_study["root"], secret_study["study_dir"]
    exported = json.loads((root / "trials.json").read_text())
    assert len(exported) >= 2 and "user_attrs" in exported[0]
    metrics = sorted(study_dir.glob("trial_*/metrics.json"))
    assert len(metrics) == 2
    for path in [root / "trials.json", root / "trials.csv", *metrics]:
        text = path.read_text()
        for marker in ("://", "postgresql", "127.0.0.1:5432", SECRET):
            assert marker not in text, f"{marker!r} in {path.name}"


# --- what `hpo finalize NAME` takes from the study's database --------------------------------


@pytest.mark.slow
@pytest.mark.postgres
def test_an_edited_record_cannot_send_finalize_elsewhere_or_to_another_server(
    tmp_path, postgres_url, study_name, tiny_roberta, tiny_deberta
):
    """Issue #48 item 13: a writer of the shared database who edits the study's recorded spec
    sent `hpo finalize NAME`'s final/ and artifacts to another output_dir (exit 0) and made it
    contact another MLflow server. Each is now refused in one line before anything is written
    or contacted; with the server named by the user, the same finalize runs, in the study's own
    folder."""
    assets = tune_assets(tmp_path, tiny_roberta, tiny_deberta, posts=60, seed=0)
    sets = ("--set", "n_trials=2", "--set", "train.epochs=1")
    tuned = run_tune("criteria-smoke.yaml", study_name, postgres_url, assets, 1, *sets)
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    uid = read_study(study_name, postgres_url).user_attrs["uid"]
    folder = outputs.study_dir(assets["root"] / study_name, study_name, uid)
    finalize = hpo_argv("finalize", study_name, "--storage", postgres_url, "--no-progress")
    finalize += ["--top-k", "1", "--seeds", "1"]

    def refused(*extra: str) -> str:
        run = subprocess.run(
            [*finalize, *extra], cwd=tmp_path, env=_env(), capture_output=True, text=True
        )
        assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-3000:]
        assert run.stderr.count("\n") == 1 and run.stderr.startswith("hpo: error: ")
        return run.stderr

    elsewhere = tmp_path / "elsewhere"
    recorded = edit_recorded_spec(study_name, postgres_url, output_dir=str(elsewhere))
    said = refused()
    assert f"its recorded output_dir {elsewhere} holds no folder of it" in said, said
    assert "pass --set output_dir=DIR" in said
    assert not elsewhere.exists(), "nothing written there"

    with socket.socket() as server:  # where an edited record sends finalize's MLflow calls
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        uri = f"http://127.0.0.1:{server.getsockname()[1]}"
        tracking = {"mlflow": uri}
        edit_recorded_spec(
            study_name, postgres_url, output_dir=recorded["output_dir"], tracking=tracking
        )
        said = refused()
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody called
    assert f"logs to the MLflow server at {uri}; finalize contacts a server only when" in said
    assert f"pass --set tracking.mlflow={uri}, or --set tracking.mlflow=null" in said
    assert not (folder / "final").exists(), "nothing retrained"

    named = subprocess.run(
        [*finalize, "--set", "tracking.mlflow=null"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert named.returncode == 0, named.stderr[-3000:]
    assert (folder / "final" / "metrics.json").is_file() and not elsewhere.exists()


# --- the dashboard ---------------------------------------------------------------------------


def _non_loopback_address() -> str | None:
    """This machine's address on a real interface (a UDP connect sends nothing)."""
    candidates = []
    for target in ("192.0.2.1", "10.255.255.255", "8.8.8.8"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect((target, 9))
                candidates.append(s.getsockname()[0])
            except OSError:
                pass
    try:
        candidates.append(socket.gethostbyname(socket.gethostname()))
    except OSError:
        pass
    return next((a for a in candidates if not a.startswith(("127.", "0."))), None)


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except ConnectionRefusedError:
        return False


@contextmanager
def _dashboard(tmp_path: Path, *args: str):
    port = free_port()
    log = tmp_path / f"dashboard-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            hpo_argv("dashboard", *args, "--port", str(port)),
            cwd=tmp_path,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while not _accepts("127.0.0.1", port):
            assert proc.poll() is None, (
                f"dashboard exited {proc.returncode}: {log.read_text()[-2000:]}"
            )
            assert time.monotonic() < deadline, (
                f"dashboard never listened: {log.read_text()[-2000:]}"
            )
            time.sleep(0.2)
        yield port, lambda: log.read_text()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_dashboard_binds_loopback_only_by_default(tmp_path):
    address = _non_loopback_address()
    url = f"sqlite:///{tmp_path / 'x.db'}"
    get_storage(url)  # a study's database: the dashboard refuses a path with no file
    with _dashboard(tmp_path, "--storage", url) as (port, output):
        banner = output()
        assert url in banner and f"http://127.0.0.1:{port}/" in banner
        if address is None:
            pytest.skip("this machine has no non-loopback IPv4 address to try the dashboard on")
        assert not _accepts(address, port), (
            f"the dashboard answers on {address}: it must bind 127.0.0.1 only"
        )


@pytest.mark.slow
@pytest.mark.postgres
def test_dashboard_is_exposed_only_when_asked_and_masks_the_password(tmp_path, postgres_url):
    address = _non_loopback_address()
    url = _secret_url(postgres_url)
    with _dashboard(tmp_path, "--storage", url, "--host", "0.0.0.0") as (port, output):
        banner = output()
        assert SECRET not in banner
        assert (
            "postgresql+psycopg2://postgres:***@" in banner and f"http://0.0.0.0:{port}/" in banner
        )
        if address is None:
            pytest.skip("this machine has no non-loopback IPv4 address to try the dashboard on")
        assert _accepts(address, port), f"--host 0.0.0.0 must answer on {address}"


# --- static checks over the package source --------------------------------------------------

_PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_true(call: ast.Call, keyword: str) -> bool:
    return any(
        k.arg == keyword and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords
    )


def unsafe_calls(source: str) -> list[str]:
    """Every unsafe pattern in ``source``: what it is and the line."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            for module in modules:
                if module.split(".")[0] in _PICKLE_MODULES:
                    problems.append(f"line {node.lineno}: imports {module}")
            if isinstance(node, ast.ImportFrom) and node.module == "yaml":
                if unsafe := {a.name for a in node.names} & {
                    "load",
                    "unsafe_load",
                    "full_load",
                    "Loader",
                }:
                    problems.append(
                        f"line {node.lineno}: from yaml import {', '.join(sorted(unsafe))}"
                    )
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        if name in (
            "yaml.load",
            "yaml.unsafe_load",
            "yaml.full_load",
            "yaml.load_all",
            "yaml.unsafe_load_all",
        ):
            problems.append(f"line {node.lineno}: {name}(); use yaml.safe_load")
        elif name == "torch.load" and not _is_true(node, "weights_only"):
            problems.append(f"line {node.lineno}: torch.load() without weights_only=True")
        elif name in ("np.load", "numpy.load") and _is_true(node, "allow_pickle"):
            problems.append(f"line {node.lineno}: {name}(allow_pickle=True)")
        elif last in ("to_empty", "reset_parameters") and isinstance(node.func, ast.Attribute):
            problems.append(f"line {node.lineno}: .{last}() re-initialises weights")
        elif isinstance(node.func, ast.Name) and node.func.id in ("eval", "exec", "__import__"):
            problems.append(f"line {node.lineno}: {node.func.id}()")
    return problems


def test_the_checker_finds_every_unsafe_pattern():
    bad = """
import pickle
from yaml import load
from tests.support.shared_storage import edit_recorded_spec, read_study
from tests.support.tune_cli import run_tune, tune_assets
yaml.load(text)
yaml.load(text, Loader=yaml.Loader)
torch.load(path)
torch.load(path, weights_only=False)
np.load(path, allow_pickle=True)
model.to_empty(device="cpu")
module.reset_parameters()
eval("1")
exec("x = 1")
"""
    assert len(unsafe_calls(bad)) == 11, unsafe_calls(bad)
    good = """
yaml.safe_load(text)
torch.load(path, weights_only=True)
model.eval()
np.load(path)
"""
    assert unsafe_calls(good) == []


def test_package_source_has_no_unsafe_loading_or_code_execution():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 10
    problems = [
        f"{path.relative_to(REPO)}: {problem}"
        for path in files
        for problem in unsafe_calls(path.read_text(encoding="utf-8"))
    ]
    assert problems == []


# --- checkpoints -------------------------------------------------------------------------

_PICKLE_OR_TORCH_SAVE = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05", b"PK\x03\x04")


@pytest.mark.slow
def test_checkpoints_are_safetensors_and_load_back(tiny_encoder, tmp_path):
    data = write_sample(tmp_path / "data", posts=30, seed=0)
    config = TrainConfig(
        task="evidence",
        encoder=str(tiny_encoder),
        data_dir=str(data),
        epochs=1,
        batch_size=16,
        max_length=64,
        checkpoint_dir=str(tmp_path / "trial" / "checkpoint"),
    )
    checkpoint = Path(train(config).checkpoint)
    files = [p for p in checkpoint.rglob("*") if p.is_file()]
    tensors = sorted(
        p.relative_to(checkpoint).as_posix() for p in files if p.suffix == ".safetensors"
    )
    assert tensors == ["encoder/model.safetensors", "head.safetensors"]
    for path in files:
        assert path.suffix in {".safetensors", ".json", ".txt", ".model"}, (
            f"unexpected file {path.name}"
        )
        assert not path.read_bytes().startswith(_PICKLE_OR_TORCH_SAVE), (
            f"{path.name} is a pickle or torch.save file"
        )
    for name in tensors:
        with safe_open(checkpoint / name, framework="pt") as f:
            assert list(f.keys())

    model, tokenizer = load_classifier(checkpoint)
    assert not [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    for key, saved in load_file(checkpoint / "head.safetensors").items():
        assert torch.equal(model.head.state_dict()[key], saved), key
    encoder_saved = load_file(checkpoint / "encoder" / "model.safetensors")
    encoder_state = model.encoder.state_dict()
    matched = [k for k in encoder_saved if k in encoder_state]
    assert len(matched) >= len(encoder_saved) - 2, "the encoder's weights come from the checkpoint"
    assert all(torch.equal(encoder_state[k], encoder_saved[k]) for k in matched)
    batch = tokenizer(["criterion text"], ["a sentence"], return_tensors="pt")
    with torch.no_grad():
        logits = model.eval()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    logits = getattr(logits, "logits", logits)
    assert logits.shape == (1, 1) and torch.isfinite(logits).all()


# ---- every printed URL is masked, however the password is written ------------------------------


@pytest.mark.parametrize(
    ("url", "secret", "shown"),
    [
        (
            "postgresql://hpo@db/hpo?password=qsecret9&sslmode=require",
            "qsecret9",
            "postgresql://hpo@db/hpo?password=***&sslmode=require",
        ),
        (
            "postgresql://hpo:at@secret9@db:5432/hpo",
            "at@secret9",
            "postgresql://hpo:***@db:5432/hpo",
        ),
        (
            "postgresql://hpo:s3cret@db/hpo?sslpassword=key9",
            "key9",
            "postgresql://hpo:***@db/hpo?sslpassword=***",
        ),
        ("not a url with s3cret", "s3cret", "<storage URL hidden>"),
    ],
)
def test_redact_masks_query_passwords_unescaped_at_signs_and_unparseable_urls(url, secret, shown):
    from hpo.storage_url import redact

    assert redact(url) == shown
    assert secret not in redact(url, f"connection to {url} failed")


@pytest.mark.postgres
@pytest.mark.parametrize("command", ["status", "best", "export"])
@pytest.mark.parametrize("password", ["?password=qsecret9", "@"])
@pytest.mark.slow
def test_query_and_at_sign_passwords_are_never_printed(postgres_url, command, password):
    base = sa.make_url(postgres_url)
    host = f"{base.host}:{base.port or 5432}/{base.database}"
    url = (
        f"postgresql://{base.username}@{host}{password}"
        if password.startswith("?")
        else f"postgresql://{base.username}:at@secret9@{host}"
    )
    result = subprocess.run(
        hpo_argv(command, "no-such-study", "--storage", url),
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert (
        "qsecret9" not in result.stdout + result.stderr
        and "secret9" not in result.stdout + result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
