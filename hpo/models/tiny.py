"""Tiny but real encoders, built offline, so tests and the demo exercise the real
``from_pretrained`` path without a model hub.

The tokenizer is trained on local text (the sample-data sentence bank); the encoder is
randomly initialised from a small config and written with ``save_pretrained``.
RoBERTa gets a byte-level BPE tokenizer; DeBERTa-v2 gets only a SentencePiece
``spm.model``, like the real DeBERTa-v3 checkpoints, so loading converts it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from pathlib import Path

import torch

from hpo.errors import UsageError
from hpo.models.loading import model_construction

ARCHS = ("roberta", "deberta-v2")


def make_tiny_encoder(arch: str, out_dir: str | Path, *, texts: Iterable[str] | None = None,
                      hidden_size: int = 64, layers: int = 2, heads: int = 2, vocab_size: int = 800,
                      max_positions: int = 514, masked_lm: bool = False, seed: int = 0) -> Path:
    """Write a small ``arch`` encoder and its tokenizer to ``out_dir``; returns the path.

    ``masked_lm`` saves a masked-LM model instead (its output layer is tied to the input
    embeddings, which is what the thread-race tests need).
    """
    if arch not in ARCHS:
        raise UsageError(f"unknown --arch {arch!r}; choose one of {', '.join(ARCHS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if texts is None:
        from hpo.data.sample import corpus_sentences

        texts = corpus_sentences()
    texts = list(texts)
    tokenizer = _roberta_tokenizer(texts, vocab_size) if arch == "roberta" else _deberta_tokenizer(texts, vocab_size, out)
    config = _config(arch, len(tokenizer), hidden_size, layers, heads, max_positions, tokenizer.pad_token_id)
    torch.manual_seed(seed)
    model_class = _model_class(arch, masked_lm)
    with model_construction():  # no pooler: our heads pool, and real MLM checkpoints have none either
        model = model_class(config, add_pooling_layer=False) if model_class.__name__ == "RobertaModel" else model_class(config)
    model.save_pretrained(out)
    if arch == "roberta":
        tokenizer.save_pretrained(out)
    return out


def _config(arch, vocab, hidden, layers, heads, max_positions, pad_id):
    from transformers import DebertaV2Config, RobertaConfig

    common = dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  intermediate_size=hidden * 4, pad_token_id=pad_id)
    if arch == "roberta":
        return RobertaConfig(**common, max_position_embeddings=max_positions, type_vocab_size=1)
    # DeBERTa-v3's own settings: relative attention, no absolute positions, no token types.
    return DebertaV2Config(**common, max_position_embeddings=max_positions - 2, relative_attention=True,
                           position_buckets=64, pos_att_type=["p2c", "c2p"], position_biased_input=False,
                           type_vocab_size=0, norm_rel_ebd="layer_norm", share_att_key=True)


def _model_class(arch: str, masked_lm: bool):
    from transformers import DebertaV2ForMaskedLM, DebertaV2Model, RobertaForMaskedLM, RobertaModel

    if arch == "roberta":
        return RobertaForMaskedLM if masked_lm else RobertaModel
    return DebertaV2ForMaskedLM if masked_lm else DebertaV2Model


def _roberta_tokenizer(texts: list[str], vocab_size: int):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizer

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=1, special_tokens=specials, show_progress=False)
    merges = [tuple(pair) for pair in json.loads(bpe._tokenizer.to_str())["model"]["merges"]]
    return RobertaTokenizer(vocab=bpe.get_vocab(), merges=merges, model_max_length=512)


def _deberta_tokenizer(texts: list[str], vocab_size: int, out: Path):
    import sentencepiece as spm
    from transformers import AutoTokenizer

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size, hard_vocab_limit=False,
        model_type="unigram", pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece="[PAD]", unk_piece="[UNK]",
        bos_piece="[CLS]", eos_piece="[SEP]", user_defined_symbols=["[MASK]"], minloglevel=2,
    )
    (out / "spm.model").write_bytes(model.getvalue())
    (out / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "DebertaV2Tokenizer", "model_max_length": 512, "do_lower_case": False}) + "\n"
    )
    return AutoTokenizer.from_pretrained(out)
