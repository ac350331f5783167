"""Tokenizer loading, apart from model loading: ``AutoTokenizer`` alone imports in about a
third of the time ``AutoModel`` takes, and the launcher's checks need only tokenizers."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer


def load_tokenizer(name_or_path: str | Path):
    return AutoTokenizer.from_pretrained(name_or_path)
