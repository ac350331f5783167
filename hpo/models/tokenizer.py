"""Tokenizer loading, apart from model loading: importing ``AutoTokenizer`` skips
transformers' modeling code (3 s of imports on a 2-core machine), and the launcher's
checks need only tokenizers."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer, PretrainedConfig

from hpo.errors import UsageError


def load_tokenizer(name_or_path: str | Path):
    """The tokenizer of an encoder (or of a saved model's ``tokenizer`` folder), checked
    against the vocabulary of the model beside it, where ``config.json`` gives one."""
    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    check_vocabulary(name_or_path, len(tokenizer))
    return tokenizer


def check_vocabulary(name_or_path: str | Path, tokens: int) -> None:
    """A tokenizer of ``tokens`` tokens fits the model's embeddings: transformers builds a
    few-token tokenizer, without a word, from a folder that lacks its tokenizer files (every
    word then reads as unknown), and a token past the embeddings fails a trial."""
    try:
        config, _ = PretrainedConfig.get_config_dict(name_or_path)
    except (OSError, ValueError):  # no config.json: a saved model's tokenizer folder
        return
    vocabulary = config.get("vocab_size")
    if not isinstance(vocabulary, int):
        return
    if tokens > vocabulary:
        raise UsageError(
            f"{name_or_path}: its tokenizer has {tokens} tokens but the model's embeddings hold "
            f"{vocabulary} (config.json vocab_size), so a token past them cannot be read; keep "
            "the model with the tokenizer it was trained with"
        )
    if tokens < vocabulary // 2:
        raise UsageError(
            f"{name_or_path}: its tokenizer has only {tokens} tokens where the model's "
            f"vocabulary holds {vocabulary}: the folder lacks its tokenizer files "
            "(tokenizer.json, or the vocab/merges or spm.model files); copy them from where "
            "the model came from"
        )
