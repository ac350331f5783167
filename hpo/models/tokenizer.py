"""Tokenizer loading, apart from model loading: importing ``AutoTokenizer`` skips
transformers' modeling code (3 s of imports on a 2-core machine), and the launcher's
checks need only tokenizers."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer


def load_tokenizer(name_or_path: str | Path):
    return AutoTokenizer.from_pretrained(name_or_path)
