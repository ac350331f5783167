"""Posts to predict on: a CSV file laid out as ReDSM5's posts file, or JSON Lines with the
same fields.

Both are checked as strictly as training data (``redsm5.posts_from_rows``): every problem is a
one-line ``DataError`` naming the file, the line and the fix, raised before any model runs.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

from hpo.data.redsm5 import POST_COLUMNS, Post, parse_posts, posts_from_rows
from hpo.errors import DataError

INPUT_FORMATS = (".csv", ".jsonl")


def load_posts(path: str | Path) -> list[Post]:
    """The posts of ``path`` in file order; ``.csv`` or ``.jsonl``, each with ``post_id`` and
    ``text``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if path.exists() and not path.is_file():  # a folder, a FIFO, a device: say which
        raise DataError(
            f"{path}: is {_kind(path)}, not a file; pass --input a .csv or .jsonl file of posts"
        )
    if suffix not in INPUT_FORMATS:
        raise DataError(
            f"{path}: unknown input format {suffix or '(no extension)'!r}; give a .csv or .jsonl "
            f"file with the fields {', '.join(POST_COLUMNS)}"
        )
    if not path.is_file():
        raise DataError(f"{path}: file not found; pass --input a .csv or .jsonl file of posts")
    data = path.read_bytes()
    posts = (
        parse_posts(path, data)
        if suffix == ".csv"
        else posts_from_rows(path, _jsonl_rows(path, data))
    )
    return list(posts.values())


def _jsonl_rows(path: Path, data: bytes) -> list[tuple[int, dict[str, str]]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{path}: line {line}: not valid UTF-8; re-save the file as UTF-8") from exc
    rows = []
    # JSON Lines ends a record at "\n" alone: str.splitlines also splits at U+2028, U+0085 and
    # the like, which JSON allows raw inside a string
    for line, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{path}: line {line}: not valid JSON ({exc.msg}); write one object per line"
            ) from exc
        except ValueError:  # a number past Python's 4,300-digit limit for reading integers
            raise DataError(
                f"{path}: line {line}: a number too long to read (over 4,300 digits); "
                "write post_id as a JSON string"
            ) from None
        if not isinstance(record, dict):
            raise DataError(
                f"{path}: line {line}: expected a JSON object with {', '.join(POST_COLUMNS)}, "
                f"got {type(record).__name__}"
            )
        missing = [name for name in POST_COLUMNS if name not in record]
        if missing:
            raise DataError(
                f"{path}: line {line}: missing field(s) {', '.join(missing)}; "
                f"every line needs {', '.join(POST_COLUMNS)} (found {', '.join(record) or 'none'})"
            )
        if not isinstance(record["text"], str):
            raise DataError(
                f"{path}: line {line}: text must be a string, not {_json_kind(record['text'])}"
            )
        post_id = record["post_id"]
        if isinstance(post_id, bool) or not isinstance(post_id, (str, int)):
            # a float id comes back as Python writes it (1e2 as 100.0, NaN as nan): the
            # predictions would no longer join onto the posts they came from
            raise DataError(
                f"{path}: line {line}: post_id must be a string or an integer, not "
                f"{_json_kind(post_id)}; write it as a JSON string"
            )
        for name in (
            POST_COLUMNS
        ):  # JSON escapes can spell a lone surrogate, which no tokenizer or CSV can take
            if isinstance(record[name], str) and (bad := _lone_surrogate(record[name])):
                raise DataError(
                    f"{path}: line {line}: {name} holds {ascii(bad)}, half of a surrogate pair "
                    "and not "
                    "valid Unicode; fix or drop that escape"
                )
        rows.append((line, {"post_id": str(record["post_id"]), "text": record["text"]}))
    if not rows:
        raise DataError(
            f"{path}: file is empty; it needs one JSON object with "
            f"{', '.join(POST_COLUMNS)} per line"
        )
    return rows


def _json_kind(value) -> str:
    """A JSON value as an error names it: a number as written, anything else by its kind."""
    if isinstance(value, float):
        return f"the number {json.dumps(value)}"
    kinds = {bool: "true/false", type(None): "null", dict: "an object", list: "a list"}
    return kinds.get(type(value), "a number")


def _kind(path: Path) -> str:
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (a named pipe)"
    return "a device or socket"


def _lone_surrogate(text: str) -> str | None:
    """The first character of ``text`` that UTF-8 cannot encode (an unpaired surrogate), if any."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return text[exc.start]
    return None
