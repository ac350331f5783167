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


@pytest.mark.parametrize(
    ("arch", "files"),
    [("roberta", ["tokenizer.json"]), ("deberta", ["spm.model", "tokenizer.json"])],
)
def test_a_folder_missing_its_tokenizer_files_is_refused_not_read_as_unknown_words(
    tiny_roberta, tiny_deberta, tmp_path, arch, files
):
    """transformers built a 5- or 7-token tokenizer from such a folder without a word: every
    word was [UNK], and trials trained on that (a RoBERTa one failed with a traceback)."""
    import shutil

    from hpo.errors import UsageError

    folder = shutil.copytree(tiny_roberta if arch == "roberta" else tiny_deberta, tmp_path / arch)
    for name in files:
        (folder / name).unlink(missing_ok=True)
    with pytest.raises(UsageError, match=r"its tokenizer has only \d+ tokens where the model's"):
        load_tokenizer(folder)


def test_a_tokenizer_past_the_models_embeddings_is_refused(tiny_roberta, tmp_path):
    """A token id past the embeddings failed every trial with 'index out of range in self'."""
    import json
    import shutil

    from hpo.errors import UsageError

    folder = shutil.copytree(tiny_roberta, tmp_path / "small")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "vocab_size": 300}))
    with pytest.raises(UsageError, match=r"has \d+ tokens but the model's embeddings hold 300"):
        load_tokenizer(folder)
