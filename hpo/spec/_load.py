"""Reading a study file: YAML (a key written twice is an error), then ``key.path=value``
overrides, then the storage by precedence, into one validated ``StudySpec``."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from hpo.spec._base import SpecError, _as_number, _locate
from hpo.spec._study_spec import StudySpec
from hpo.storage_url import StorageUrl


def parse_override(text: str) -> tuple[list[str], object]:
    """``"train.epochs=2"`` -> ``(["train", "epochs"], 2)``; the value is read as YAML."""
    key, equals, value = text.partition("=")
    keys = [part.strip() for part in key.split(".")]
    if not equals or not all(keys):
        raise SpecError(f"override {text!r}: expected the form key=value, e.g. train.epochs=2")
    try:
        return keys, _as_number(yaml.safe_load(value))
    except yaml.YAMLError:
        raise SpecError(f"override {text!r}: the value is not valid YAML") from None


def argv_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides a child process may see on its command line: all but ``storage=…``, whose
    URL may hold a password that `ps` shows every user of the machine. The parent resolves the
    storage and hands it to the child in ``HPO_STORAGE``, which the child reads instead."""
    return [text for text in overrides if _override_key(text) != "storage"]


def set_flags(overrides: Sequence[str]) -> list[str]:
    """``--set KEY=VALUE`` for each override a child may see (``argv_overrides``), in order."""
    return [part for text in argv_overrides(overrides) for part in ("--set", text)]


def _override_key(text: str) -> str | None:
    try:
        return ".".join(parse_override(text)[0])
    except SpecError:
        return None


def load_spec(
    path: str | Path,
    overrides: Sequence[str] = (),
    storage: StorageUrl | str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    timeout: float | None = None,
) -> StudySpec:
    """Read, override and validate a study file; ``storage`` (the CLI flag) wins over
    ``$HPO_STORAGE``, which wins over the file, which wins over the default; ``timeout``
    (``--timeout``, seconds) wins over the file's, validated as the file's would be."""
    document = _read_mapping(Path(path))
    if timeout is not None:
        if any(_override_key(text) == "timeout" for text in overrides):
            raise SpecError(
                f"{path}: --timeout and --set timeout= both set the time budget; give one of them"
            )
        document["timeout"] = timeout
    return spec_from_document(document, str(path), overrides, storage, env)


def spec_from_document(
    document: Mapping[str, Any],
    source: str,
    overrides: Sequence[str] = (),
    storage: StorageUrl | str | None = None,
    env: Mapping[str, str] | None = None,
) -> StudySpec:
    """A study file's contents (or the copy a study recorded of its spec), overridden and
    validated as ``load_spec`` does; ``source`` names it in every message."""
    document = copy.deepcopy(dict(document))
    for text in overrides:
        try:
            keys, value = parse_override(text)
        except SpecError as error:
            raise SpecError(f"{source}: {error}") from None
        _set(document, keys, value, source)
        _narrow(document, keys, value)
    from_file = document.get("storage")
    if from_file is None or isinstance(from_file, str):  # else pydantic names the wrong type
        document["storage"] = StorageUrl.resolve(storage, from_file, env)
    try:
        spec = StudySpec.model_validate(document)
    except ValidationError as error:
        raise SpecError(
            f"{source}: " + "; ".join(": ".join(_locate(e)) for e in error.errors())
        ) from None
    spec._source = source
    return spec


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such study file") from None
    except OSError as error:
        raise SpecError(f"{path}: cannot read the study file: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise SpecError(
            f"{path}: byte {error.start}: not valid UTF-8; save the study file as UTF-8"
        ) from None
    try:
        document = _UniqueKeyLoader.read(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        problem = getattr(error, "problem", None) or str(error).replace("\n", " ")
        raise SpecError(f"{path}: {where}: invalid YAML: {problem}") from None
    if not isinstance(document, dict):
        found = "an empty file" if document is None else f"a {type(document).__name__}"
        raise SpecError(
            f"{path}: top level: must be a mapping of keys (name:, task:, ...), not {found}"
        )
    return document


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; in a study file that is a typo, not a wish.
    A SafeLoader: it builds plain data only."""

    @classmethod
    def read(cls, text: str) -> object:
        loader = cls(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}; keep one", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _narrow(document: dict[str, Any], keys: list[str], value: object) -> None:
    """One flag to try one value of a searched setting (issue #55 item 14): ``--set
    train.NAME=V`` fixes NAME for this run, so its search ends, and so does every search
    conditioned on another value of it (a ``when`` that V meets is dropped, as it always holds).
    ``--set search_space.NAME=null`` ends NAME's search, and fewer ``choices`` for it narrow
    the conditions on it to those left. A file that both fixes and searches a setting is still
    refused: there only one of them can be what its author meant."""
    space = document.get("search_space")
    if not isinstance(space, dict) or keys[0] not in ("train", "search_space"):
        return
    name = keys[1] if len(keys) > 1 else None
    if keys[0] == "search_space" and len(keys) == 2 and value is None:
        space.pop(name, None)
        return
    if keys[0] == "search_space":  # fewer choices: the conditions keep only those left
        param = space.get(name)
        choices = param.get("choices") if isinstance(param, dict) else None
        if keys[2:] in ([], ["choices"]) and isinstance(choices, list):
            _conditions_on(space, name, choices, choices)
        return
    if len(keys) != 2 or not isinstance(space.get(name), dict):
        return
    del space[name]
    ended = {name} | _conditions_on(space, name, [value], [])
    # a warm start of another value describes another run: left out; the others lose the
    # settings no longer searched
    if isinstance(starts := document.get("warm_start"), list):
        document["warm_start"] = [
            {k: v for k, v in start.items() if k not in ended} if isinstance(start, dict) else start
            for start in starts
            if not isinstance(start, dict) or start.get(name, value) == value
        ]


def _conditions_on(space: dict[str, Any], name: str, values: list, choices: list) -> set[str]:
    """Narrow every ``when`` on ``name`` to ``values`` (what it can still take): a search that
    no value left meets ends (its names are returned); a condition every one of ``choices``
    meets (none, where ``name`` is no longer searched) is dropped, as it always holds."""
    ended = set()
    for child, param in list(space.items()):
        when = param.get("when") if isinstance(param, dict) else None
        if not isinstance(when, dict) or name not in when:
            continue
        allowed = when[name] if isinstance(when[name], list) else [when[name]]
        kept = [v for v in allowed if v in values]
        if not kept:
            del space[child]  # never sampled for what is left
            ended.add(child)
        elif choices and set(choices) - set(kept):
            param["when"] = {**when, name: kept}
        elif len(when) == 1:
            param.pop("when")
        else:
            param["when"] = {parent: v for parent, v in when.items() if parent != name}
    return ended


def _set(document: dict[str, Any], keys: list[str], value: object, source: str) -> None:
    node = document
    for depth, key in enumerate(keys[:-1]):
        if node.get(key) is None:  # a missing key, or an empty `train:` in the file
            node[key] = {}
        node = node[key]
        if not isinstance(node, dict):
            raise SpecError(
                f"{source}: {'.'.join(keys[: depth + 1])}: is not a mapping, cannot set "
                f"{'.'.join(keys)}"
            )
    node[keys[-1]] = value
