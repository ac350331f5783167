"""A saved tokenizer loads apart from any model: the same tokenizer from a folder however named,
with the special tokens its encoder was trained with."""

from __future__ import annotations

import pytest

from hpo.models.tokenizer import load_tokenizer


def test_a_folder_loads_the_same_tokenizer_as_a_path_or_a_string(tiny_roberta):
    by_path, by_name = load_tokenizer(tiny_roberta), load_tokenizer(str(tiny_roberta))
    text = "I can't sleep at all."
    ids = by_path(text)["input_ids"]
    assert ids == by_name(text)["input_ids"]
    assert ids[0] == by_path.cls_token_id and ids[-1] == by_path.sep_token_id
    assert by_path.decode(ids, skip_special_tokens=True).strip() == text


def test_a_folder_without_a_tokenizer_is_an_error(tmp_path):
    with pytest.raises((OSError, ValueError)):
        load_tokenizer(tmp_path)
