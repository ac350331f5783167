"""A study found by its name or its spec file, and the spec it was tuned with, which the study
keeps: every command that reads a study (``hpo finalize``, ``best``, ``status``, ``export``,
``report``, ``dashboard``) takes its name alone, and a study tuned with ``--set`` flags is
finalized with them without repeating them.

``open_study`` records the spec as ``hpo tune`` (or a worker) resolved it, file and overrides
together, in a study system attribute: optuna-dashboard shows the user attributes, and a whole
spec there would push the ones a user reads out of view. The storage URL is left out (it may
hold a password, and the study is found through it anyway); paths stay as the spec gave them,
relative to where hpo runs, as they are when the file is read again.

Anyone who can write to the study's database can edit that record. What it decides about
places is therefore confirmed on this machine before ``hpo finalize NAME`` uses it
(``_confirm_places``): finalize writes only into the study's own folder that tuning left under
output_dir, reads and writes a tokenization cache only inside output_dir or the folder it runs
in, and contacts an MLflow server only when the user names it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import optuna
import sqlalchemy as sa

from hpo.attributes import SPEC_ATTR, UID_ATTR
from hpo.errors import UsageError
from hpo.outputs import lies_inside
from hpo.spec import SpecError, StudySpec, load_spec, parse_override, spec_from_document
from hpo.storage_url import StorageUrl, redact
from hpo.study.storage._connect import get_storage
from hpo.study.storage._optuna_private import study_id, study_storage


def load_existing_study(name: str, storage_url: StorageUrl | str) -> optuna.Study:
    """A study by name, for the commands that read one; an unknown name is one line listing
    the studies there (a SQLite file that does not exist is not created to say so)."""
    storage_url = StorageUrl.of(storage_url)
    if not sqlite_file_exists(storage_url):
        raise UsageError(f"no study named {name!r} in {storage_url}; studies there: none")
    storage = get_storage(storage_url)
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise UsageError(
            f"no study named {name!r} in {storage_url}; studies there: {', '.join(names) or 'none'}"
        ) from None


def load_study_ref(ref: str, storage: StorageUrl | str | None) -> optuna.Study:
    """STUDY as the read commands take it: a spec file (name and storage from it) or a name."""
    if ref.endswith((".yaml", ".yml")) and Path(ref).exists():
        spec = load_spec(ref, (), storage)
        return load_existing_study(spec.name, spec.storage)
    return load_existing_study(ref, StorageUrl.resolve(storage))


def is_spec_file(ref: str) -> bool:
    """STUDY names a study file rather than a study (``load_spec_ref``)."""
    return ref.endswith((".yaml", ".yml")) or Path(ref).is_file()


def load_spec_ref(
    ref: str, overrides: Sequence[str] = (), storage: StorageUrl | str | None = None
) -> StudySpec:
    """STUDY as ``hpo finalize`` takes it: a YAML file (read as ``load_spec`` reads it), or a
    study's name on ``storage`` (``--storage``, else ``$HPO_STORAGE``, else the default, as
    ``hpo status NAME`` finds it), whose recorded spec is used with ``overrides`` applied and
    its places confirmed (``_confirm_places``)."""
    if is_spec_file(ref):
        return load_spec(ref, overrides, storage)
    url = StorageUrl.resolve(storage)
    study = load_existing_study(ref, url)
    spec = recorded_spec(study, url, overrides)
    if spec is None:
        raise UsageError(
            f"study {ref!r} in {url} has no spec recorded (it was created before hpo kept one); "
            "pass its YAML file and the --set flags it was tuned with instead of its name"
        )
    given = _keys(overrides)
    if spec.name != ref and "name" in given:
        raise UsageError(f"--set name={spec.name} would leave study {ref!r}; drop that --set")
    if spec.name != ref:
        raise UsageError(
            f"study {ref!r}: its recorded spec names another study ({spec.name!r}), so the "
            "record was edited in the database; pass the study's YAML file instead of its name"
        )
    _confirm_places(study, spec, given)
    return spec


def _keys(overrides: Sequence[str]) -> set[str]:
    """The dotted keys ``overrides`` set (valid ones: ``recorded_spec`` has applied them)."""
    return {".".join(parse_override(text)[0]) for text in overrides}


def _confirm_places(study: optuna.Study, spec: StudySpec, given: set[str]) -> None:
    """Refuse a recorded place the user did not name here (``given``: the keys of their --set
    flags): an output_dir that holds no folder of this study on this machine (tuning made one;
    a writer of the database cannot), and any MLflow server. An edited record would otherwise
    send finalize's model and files elsewhere, or to another server."""
    trusted = "a writer of its database can change that record"
    folder = spec.study_dir(study_uid(study) or "")
    if "output_dir" not in given and not folder.is_dir():
        raise UsageError(
            f"study {spec.name!r}: its recorded output_dir {spec.output_dir} holds no folder of "
            f"it ({folder}), and finalize writes only beside the study's trials ({trusted}); "
            "run it where the study was tuned, or pass --set output_dir=DIR"
        )
    for name in spec.encoders:  # a hub id would be a download; finalize by name loads none
        path = spec.model_paths.get(name, name)
        if not given & {"model_paths", f"model_paths.{name}"} and not Path(path).is_dir():
            raise UsageError(
                f"study {spec.name!r}: its recorded encoder {name!r} is {path}, no folder on "
                f"this machine, and finalize by name loads only the local encoders the study "
                f"trained ({trusted}); pass --set model_paths.{name}={path} if you mean it, or "
                "the encoder's folder"
            )
    cache = spec.setting("cache_dir")
    if cache and not given & {"train", "train.cache_dir"} and not _ours(cache, spec.output_dir):
        raise UsageError(
            f"study {spec.name!r}: its recorded train.cache_dir {cache} resolves to "
            f"{Path(cache).resolve()}, outside its output_dir {spec.output_dir} and the folder "
            f"hpo runs in, and holds no cache hpo made; finalize would write there ({trusted}): "
            "pass --set "
            f"train.cache_dir={cache} if it is yours, or --set train.cache_dir=null"
        )
    if spec.tracking.mlflow and not given & {"tracking", "tracking.mlflow"}:
        uri = redact(spec.tracking.mlflow)
        raise UsageError(
            f"study {spec.name!r}: its recorded spec logs to the MLflow server at {uri}; "
            f"finalize contacts a server only when you name it ({trusted}): pass --set "
            f"tracking.mlflow={uri}, or --set tracking.mlflow=null to finalize without MLflow"
        )


def _ours(cache_dir: str, output_dir: str) -> bool:
    """A recorded tokenization cache finalize may read and write without being told: inside
    output_dir (confirmed above), under the folder hpo runs in, where the spec's relative paths
    resolve (the shipped specs keep it beside output_dir), or a folder that already holds hpo's
    tokenization caches on this machine, as tuning left it (as output_dir is confirmed: a writer
    of the database cannot make one; what it holds is checked against the data when read)."""
    return (
        lies_inside(cache_dir, output_dir)
        or lies_inside(cache_dir, Path.cwd())
        or any(Path(cache_dir).glob("*/labels.npy"))
    )


def spec_document(spec: StudySpec) -> dict:
    """``spec`` as the study records it: plain JSON, every default filled in."""
    return spec.model_dump(mode="json", exclude={"storage"})


def record_spec(study: optuna.Study, spec: StudySpec) -> None:
    """Keep ``spec`` in ``study``, replacing the one recorded before (one read, and a write
    only when it changed)."""
    storage, sid = study_storage(study), study_id(study)
    document = spec_document(spec)
    if recorded_document(study) != document:
        storage.set_study_system_attr(sid, SPEC_ATTR, document)


def recorded_document(study: optuna.Study) -> dict | None:
    """The recorded spec as it is stored, unchecked; None where none was recorded. One edited
    in the database into what is no JSON mapping is refused in one line: every read of the
    study's system attributes fails on it (Optuna's own too), and it is not replaced unsaid."""
    try:
        document = study_storage(study).get_study_system_attrs(study_id(study)).get(SPEC_ATTR)
    except json.JSONDecodeError:
        raise _unreadable(study, "not valid JSON") from None
    if document is not None and not isinstance(document, dict):
        raise _unreadable(study, f"a JSON {type(document).__name__}, not a mapping of keys")
    return document


def recorded_spec(
    study: optuna.Study, storage: StorageUrl | str | None = None, overrides: Sequence[str] = ()
) -> StudySpec | None:
    """The spec ``study`` was last tuned with, on ``storage`` (the one it was found on), with
    ``overrides`` applied as to a file; None for a study that recorded none (created by
    Optuna itself)."""
    document = recorded_document(study)
    if document is None:
        return None
    return spec_from_document(document, f"study {study.study_name}", overrides, storage)


def _unreadable(study: optuna.Study, why: str) -> SpecError:
    return SpecError(
        f"study {study.study_name!r}: its recorded spec is unreadable ({why}); pass the "
        "study's YAML file (with the --set flags it was tuned with) instead of its name"
    )


def sqlite_file_exists(url: StorageUrl) -> bool:
    """False for a SQLite URL whose file is missing (opening it would create it); True for
    every other storage."""
    if not url.is_sqlite:
        return True
    database = sa.engine.make_url(url.sqlalchemy).database
    return not database or database == ":memory:" or Path(database).exists()


def study_uid(study: optuna.Study) -> str | None:
    """The random id ``open_study`` records when it creates a study (None for a study no
    hpo worker or ``hpo tune`` has opened yet)."""
    return study.user_attrs.get(UID_ATTR)
