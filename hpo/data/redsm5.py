"""Load the two ReDSM5 CSV files into a validated, immutable corpus.

Every problem becomes a one-line ``DataError`` naming the file, the line (as numbered in
the file, header = line 1; a multi-line record is named by its first line) and the fix.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hpo.errors import DataError

SYMPTOMS: tuple[str, ...] = (
    "DEPRESSED_MOOD",
    "ANHEDONIA",
    "APPETITE_CHANGE",
    "SLEEP_ISSUES",
    "PSYCHOMOTOR",
    "FATIGUE",
    "WORTHLESSNESS",
    "COGNITIVE_ISSUES",
    "SUICIDAL_THOUGHTS",
)
SPECIAL_CASE = "SPECIAL_CASE"  # a valid label, but not one of the nine criteria
LABELS: tuple[str, ...] = (*SYMPTOMS, SPECIAL_CASE)

POSTS_FILE = "redsm5_posts.csv"
ANNOTATIONS_FILE = "redsm5_annotations.csv"
POST_COLUMNS = ("post_id", "text")
ANNOTATION_COLUMNS = (
    "post_id",
    "sentence_id",
    "sentence_text",
    "DSM5_symptom",
    "status",
    "explanation",
)

# Typos seen in public copies of ReDSM5. Explicit on purpose: a new typo should fail
# loudly with the list of accepted labels rather than be guessed at.
_ALIASES = {"LEEP_ISSUES": "SLEEP_ISSUES"}
_SEPARATORS = re.compile(r"[\s\-]+")


def normalise_symptom(raw: str) -> str:
    """Upper-case ``raw``, turn spaces/hyphens into underscores and fix known typos.

    Never raises; the result may still be an unknown label, which the caller reports.
    """
    key = _SEPARATORS.sub("_", raw.strip()).upper()
    return _ALIASES.get(key, key)


@dataclass(frozen=True)
class Post:
    post_id: str
    text: str


@dataclass(frozen=True)
class Annotation:
    post_id: str
    sentence_id: str
    sentence_text: str
    symptom: str  # normalised: one of LABELS
    status: int  # 1 = evidence present, 0 = clinician marked absent
    explanation: str


@dataclass(frozen=True)
class Corpus:
    """Posts keyed by post_id in file order, annotations in file order.

    ``fingerprint`` is the sha256 of both files' bytes: it identifies the data for caches.
    """

    posts: dict[str, Post]
    annotations: tuple[Annotation, ...]
    fingerprint: str


def load_redsm5(data_dir: str | Path) -> Corpus:
    """Read ``redsm5_posts.csv`` and ``redsm5_annotations.csv`` from ``data_dir``."""
    directory = Path(data_dir)
    if not directory.is_dir():
        raise DataError(
            f"{directory}: data directory not found; pass the folder that holds "
            f"{POSTS_FILE} and {ANNOTATIONS_FILE}"
        )
    posts_path, annotations_path = directory / POSTS_FILE, directory / ANNOTATIONS_FILE
    posts_bytes, annotations_bytes = _read_bytes(posts_path), _read_bytes(annotations_path)
    posts = parse_posts(posts_path, posts_bytes)
    annotations = _parse_annotations(annotations_path, annotations_bytes, posts)
    return Corpus(posts, annotations, _digest(posts_bytes, annotations_bytes))


def files_fingerprint(data_dir: str | Path) -> str:
    """The data's identity (``Corpus.fingerprint``) from the files' bytes alone, without parsing."""
    directory = Path(data_dir)
    return _digest(_read_bytes(directory / POSTS_FILE), _read_bytes(directory / ANNOTATIONS_FILE))


def _digest(posts_bytes: bytes, annotations_bytes: bytes) -> str:
    digest = hashlib.sha256()
    for data in (posts_bytes, annotations_bytes):
        digest.update(len(data).to_bytes(8, "big"))  # so bytes moved between files change it
        digest.update(data)
    return digest.hexdigest()


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise DataError(
            f"{path}: file not found; put {path.name} (ReDSM5 layout) in {path.parent} "
            "or generate sample data with `hpo data sample` (hpo.fixtures.write_sample)"
        )
    return path.read_bytes()


def _read_table(
    path: Path, data: bytes, required: tuple[str, ...]
) -> list[tuple[int, dict[str, str]]]:
    """Return (first line of the record, row by column name) for every non-blank record."""
    try:
        text = data.decode("utf-8-sig")  # -sig: spreadsheet exports often start with a BOM
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{path}: line {line}: not valid UTF-8; re-save the file as UTF-8") from exc
    # a field can be as long as the file: real posts run to ~7,000 words
    csv.field_size_limit(max(csv.field_size_limit(), len(text)))
    # strict: a quote never closed is an error, not the rest of the file read into one field
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1
    try:
        header = [name.strip() for name in next(reader, [])]
        if not any(header):
            raise DataError(
                f"{path}: line 1: file is empty; it needs the header "
                f"{','.join(required)} and data rows"
            )
        repeated = sorted({name for name in header if name and header.count(name) > 1})
        if repeated:
            raise DataError(
                f"{path}: line 1: column(s) {', '.join(repeated)} appear more than once "
                "in the header; "
                "keep one column of each name"
            )
        missing = [name for name in required if name not in header]
        if missing:
            raise DataError(
                f"{path}: line 1: missing column(s) {', '.join(missing)} "
                f"(found: {', '.join(header)}); "
                f"the header must include {', '.join(required)}"
            )
        rows = []
        start = reader.line_num + 1
        for fields in reader:
            if any(field.strip() for field in fields):
                if len(fields) != len(header):
                    raise DataError(
                        f"{path}: line {start}: {len(fields)} fields "
                        f"but the header has {len(header)}; "
                        "quote fields that contain commas, quotes or newlines"
                    )
                rows.append((start, dict(zip(header, fields, strict=True))))
            start = reader.line_num + 1
    except csv.Error as exc:
        if str(exc) == "unexpected end of data":  # the csv module's words for an open quote
            raise DataError(
                f"{path}: line {start}: a quoted field that starts here is never closed, so "
                "every line after it would be read into it; close the quote (a quote inside a "
                'quoted field is written "")'
            ) from exc
        raise DataError(
            f"{path}: line {reader.line_num}: malformed CSV ({exc}); fix the quoting"
        ) from exc
    if not rows:
        raise DataError(
            f"{path}: line 1: header only, no data rows; add at least one row below the header"
        )
    return rows


def parse_posts(path: Path, data: bytes) -> dict[str, Post]:
    """The posts of a ``post_id,text`` CSV file's bytes (``path`` names it in errors)."""
    return posts_from_rows(path, _read_table(path, data, POST_COLUMNS))


def posts_from_rows(path: Path, rows: Iterable[tuple[int, Mapping[str, str]]]) -> dict[str, Post]:
    """Posts keyed by id from (line, row) pairs, every id present and unique and every text
    non-empty."""
    posts: dict[str, Post] = {}
    first_line: dict[str, int] = {}
    for line, row in rows:
        post_id = row["post_id"].strip()
        if not post_id:
            raise DataError(f"{path}: line {line}: empty post_id; give every post an id")
        if post_id in posts:
            raise DataError(
                f"{path}: line {line}: duplicate post_id {post_id!r} "
                f"(first on line {first_line[post_id]}); "
                "keep one row per post"
            )
        if not _visible(row["text"]):
            raise DataError(
                f"{path}: line {line}: post {post_id!r} has empty text (nothing but spaces, "
                "zero-width or control characters); fill in the text or remove the row"
            )
        posts[post_id] = Post(post_id, row["text"])
        first_line[post_id] = line
    return posts


def _visible(text: str) -> bool:
    """Whether ``text`` shows anything: a character that is not a space, a control character
    (NUL) or an invisible format one (a zero-width space or joiner, a BOM)."""
    return any(
        not char.isspace() and unicodedata.category(char) not in ("Cc", "Cf") for char in text
    )


def _parse_annotations(path: Path, data: bytes, posts: dict[str, Post]) -> tuple[Annotation, ...]:
    annotations = []
    unknown: dict[str, int] = {}  # raw label -> first line, so every bad label is reported at once
    for line, row in _read_table(path, data, ANNOTATION_COLUMNS):
        post_id, sentence_id = row["post_id"].strip(), row["sentence_id"].strip()
        if post_id not in posts:
            raise DataError(
                f"{path}: line {line}: post_id {post_id!r} is not in {POSTS_FILE}; "
                "add the post or remove its annotations"
            )
        if not sentence_id:
            raise DataError(
                f"{path}: line {line}: empty sentence_id; give every annotated sentence an id"
            )
        status = row["status"].strip()
        if status not in ("0", "1"):
            raise DataError(
                f"{path}: line {line}: status {status!r} must be 0 (absent) or 1 (present); "
                "fix the value"
            )
        symptom = normalise_symptom(row["DSM5_symptom"])
        if symptom not in LABELS:
            unknown.setdefault(row["DSM5_symptom"].strip(), line)
        annotations.append(
            Annotation(
                post_id, sentence_id, row["sentence_text"], symptom, int(status), row["explanation"]
            )
        )
    if unknown:
        listed = ", ".join(f"{label!r} (line {line})" for label, line in unknown.items())
        raise DataError(
            f"{path}: unknown DSM5_symptom label(s) {listed}; use one of {', '.join(LABELS)}"
        )
    return tuple(annotations)
