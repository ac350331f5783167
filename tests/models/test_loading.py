"""Meta-safe loading: real from_pretrained on tiny checkpoints, bit-exact, float32, thread-safe."""

from __future__ import annotations

import threading

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForMaskedLM, PreTrainedModel

from hpo.errors import MetaTensorError
from hpo.models import loading
from hpo.models.loading import assert_no_meta, find_meta_tensors, load_pretrained
from hpo.models.tokenizer import load_tokenizer


def test_loads_without_meta_and_bit_equal_to_checkpoint(tiny_encoder):
    model, tokenizer = load_pretrained(tiny_encoder), load_tokenizer(tiny_encoder)
    assert find_meta_tensors(model) == []
    assert model.training, "from_pretrained returns eval mode; the loader must switch to train"
    saved = load_file(tiny_encoder / "model.safetensors")
    state = model.state_dict()
    assert saved, "checkpoint is empty"
    for key, tensor in saved.items():
        assert torch.equal(state[key], tensor), key
    assert tokenizer("criterion", "post text")["input_ids"]


def test_bf16_checkpoint_loads_as_float32(tiny_roberta, tmp_path):
    bf16 = AutoModel.from_pretrained(tiny_roberta, dtype=torch.bfloat16)
    bf16.save_pretrained(tmp_path)
    model = load_pretrained(tmp_path)
    dtypes = {p.dtype for p in model.parameters()}
    assert dtypes == {torch.float32}
    saved = load_file(tmp_path / "model.safetensors")
    key = "embeddings.word_embeddings.weight"
    assert saved[key].dtype == torch.bfloat16
    assert torch.equal(model.state_dict()[key], saved[key].float())
    assert torch.get_default_dtype() == torch.float32


def test_assert_no_meta_names_every_tensor():
    module = torch.nn.Linear(2, 2)
    module.register_buffer("scale", torch.empty(2, device="meta"))
    module.weight = torch.nn.Parameter(torch.empty(2, 2, device="meta"))
    with pytest.raises(MetaTensorError) as info:
        assert_no_meta(module)
    assert info.value.names == ["scale", "weight"]
    assert "scale" in str(info.value) and "weight" in str(info.value)


def test_eight_threads_loading_tied_model_leave_no_meta_and_tie_weights_working(tiny_roberta_mlm):
    errors: list[BaseException] = []
    meta_found: list[list[str]] = []
    untied: list[int] = []

    def load_many():
        try:
            for _ in range(6):
                model = load_pretrained(tiny_roberta_mlm, model_class=AutoModelForMaskedLM)
                meta_found.append(find_meta_tensors(model))
                untied.append(
                    model.lm_head.decoder.weight
                    is not model.roberta.embeddings.word_embeddings.weight
                )
                model.to("cpu")  # the crash in the old system happened here
        except BaseException as exc:  # collected: a thread's exception would be lost otherwise
            errors.append(exc)

    threads = [threading.Thread(target=load_many) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(meta_found) == 48
    assert all(names == [] for names in meta_found)
    assert not any(untied), "every load must come back with its output layer tied"
    assert PreTrainedModel.tie_weights is loading._REAL_TIE_WEIGHTS
    fresh = AutoModelForMaskedLM.from_config(
        AutoModelForMaskedLM.from_pretrained(tiny_roberta_mlm).config
    )
    assert fresh.lm_head.decoder.weight is fresh.roberta.embeddings.word_embeddings.weight


def test_construction_lock_restores_leaked_global_state():
    original = PreTrainedModel.tie_weights
    try:
        with loading.model_construction():
            torch.set_default_dtype(torch.float64)
            PreTrainedModel.tie_weights = lambda *a, **k: None  # what a racing loader leaves behind
        assert torch.get_default_dtype() == torch.float32
        assert PreTrainedModel.tie_weights is loading._REAL_TIE_WEIGHTS
    finally:
        PreTrainedModel.tie_weights = original
        torch.set_default_dtype(torch.float32)


def test_transformers_load_report_goes_to_the_trial_log_not_the_terminal(
    tiny_roberta_mlm, tmp_path, capfd
):
    """An MLM checkpoint loaded as an encoder has UNEXPECTED lm_head keys: transformers prints a
    ~12-line report; a trial keeps it in its train.log and the terminal stays quiet."""
    import logging

    from hpo.outputs import TrialOutputs

    outputs = TrialOutputs(tmp_path, "s", "uid12345", keep_top_k=0, direction="maximize")
    library = logging.getLogger("transformers")
    level = library.level
    # as a worker sets it (`hpo` itself starts transformers at ERROR)
    library.setLevel(logging.WARNING)
    try:
        with outputs.trial_log(0) as path:
            load_pretrained(tiny_roberta_mlm)
    finally:
        library.setLevel(level)
    assert "LOAD REPORT" in path.read_text() and "UNEXPECTED" in path.read_text()
    out, err = capfd.readouterr()
    assert "LOAD REPORT" not in out + err


def test_a_checkpoint_missing_encoder_weights_is_refused_not_trained_from_random(
    tiny_roberta, tmp_path
):
    """transformers starts the missing weights from random values with a warning: a trial, a
    finalize or a LoRA model's base would have trained or predicted on them."""
    from hpo.errors import IncompleteCheckpoint
    from tests.support.damaged_encoders import misshapen, without_layer

    with pytest.raises(IncompleteCheckpoint, match=r"16 encoder weight\(s\) are not in its"):
        load_pretrained(without_layer(tiny_roberta, tmp_path / "missing"))
    with pytest.raises(IncompleteCheckpoint, match=r"\(512, 64\) where the model has \(256, 64\)"):
        load_pretrained(misshapen(tiny_roberta, tmp_path / "misshapen"))
