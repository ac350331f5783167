"""Safe transfer and unwrap: the seed bugs (meta encoder behind a real head, meta buffers,
wrappers hiding methods) are caught, restored bit-exact, or reported by name."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from safetensors.torch import load_file
from torch import nn
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM

from hpo.errors import MetaTensorError
from hpo.models.classifier import CriteriaClassifier, HeadConfig
from hpo.models.device import forward_keys, safe_to_device, unwrap_model
from hpo.models.loading import encoder_init_kwargs, find_meta_tensors, load_pretrained


class HeadFirst(nn.Module):
    """The seed's failure case: the first parameters (a head) are real, the encoder is on meta."""

    def __init__(self, encoder_path, meta_encoder: bool = True):
        super().__init__()
        config = AutoConfig.from_pretrained(encoder_path)
        self.head = nn.Linear(config.hidden_size, 2)
        with torch.device("meta" if meta_encoder else "cpu"):
            self.encoder = AutoModel.from_config(config, **encoder_init_kwargs(config))


def _encoder_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {
        k.removeprefix("encoder."): v
        for k, v in model.state_dict().items()
        if k.startswith("encoder.")
    }


def test_meta_encoder_behind_real_head_without_checkpoint_lists_encoder_tensors(tiny_encoder):
    model = HeadFirst(tiny_encoder)
    assert not next(model.parameters()).is_meta, (
        "the first parameter is real: a first-param check misses this"
    )
    with pytest.raises(MetaTensorError) as info:
        safe_to_device(model, "cpu")
    expected = {
        n for n, _ in model.named_parameters(remove_duplicate=False) if n.startswith("encoder.")
    }
    assert expected and expected <= set(info.value.names)
    assert not any(n.startswith("head.") for n in info.value.names)


def test_meta_encoder_restored_bit_exact_from_checkpoint(tiny_encoder):
    model = HeadFirst(tiny_encoder)
    head_before = model.head.weight.detach().clone()
    moved = safe_to_device(model, "cpu", checkpoint=tiny_encoder)
    assert moved is model
    assert find_meta_tensors(model) == []
    saved = load_file(tiny_encoder / "model.safetensors")
    state = _encoder_state(model)
    for key, tensor in saved.items():
        if key in state:
            assert torch.equal(state[key], tensor), key
    clean = load_pretrained(tiny_encoder)
    for name, buffer in clean.named_buffers():  # non-persistent buffers rebuilt, not garbage
        assert torch.equal(model.encoder.get_buffer(name), buffer), name
    assert all(p.requires_grad for p in model.parameters())
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert torch.equal(model.head.weight, head_before)
    ids = torch.tensor([[0, 5, 6, 7, 2]])
    clean.eval(), model.encoder.eval()
    assert torch.equal(
        model.encoder(input_ids=ids).last_hidden_state, clean(input_ids=ids).last_hidden_state
    )


def test_only_a_meta_buffer_is_caught_and_rebuilt(tiny_roberta):
    model = load_pretrained(tiny_roberta)
    expected = model.embeddings.position_ids.clone()
    model.embeddings._buffers["position_ids"] = torch.empty_like(expected, device="meta")
    with pytest.raises(MetaTensorError) as info:
        safe_to_device(model, "cpu")
    assert info.value.names == ["embeddings.position_ids"]
    safe_to_device(model, "cpu", checkpoint=tiny_roberta)
    assert torch.equal(model.embeddings.position_ids, expected)
    assert "position_ids" in model.embeddings._non_persistent_buffers_set, (
        "must stay out of checkpoints"
    )


def test_restores_tied_weights_as_one_tensor(tiny_roberta_mlm):
    config = AutoConfig.from_pretrained(tiny_roberta_mlm)
    with torch.device("meta"):
        model = AutoModelForMaskedLM.from_config(config)
    safe_to_device(model, "cpu", checkpoint=tiny_roberta_mlm)
    assert find_meta_tensors(model) == []
    assert model.lm_head.decoder.weight is model.roberta.embeddings.word_embeddings.weight
    saved = load_file(tiny_roberta_mlm / "model.safetensors")
    assert torch.equal(
        model.roberta.embeddings.word_embeddings.weight,
        saved["roberta.embeddings.word_embeddings.weight"],
    )


def test_restore_keeps_placeholder_dtype_and_requires_grad(tiny_roberta):
    model = HeadFirst(tiny_roberta)
    model.encoder.to(torch.bfloat16)
    model.encoder.embeddings.word_embeddings.weight.requires_grad_(False)
    safe_to_device(model, "cpu", checkpoint=tiny_roberta)
    assert model.encoder.embeddings.word_embeddings.weight.dtype == torch.bfloat16
    assert not model.encoder.embeddings.word_embeddings.weight.requires_grad
    assert model.encoder.encoder.layer[0].attention.self.query.weight.requires_grad


def test_restores_from_sharded_checkpoint(tiny_roberta, tmp_path):
    load_pretrained(tiny_roberta).save_pretrained(tmp_path, max_shard_size="100KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    model = HeadFirst(tiny_roberta)
    safe_to_device(model, "cpu", checkpoint=tmp_path)
    clean = load_pretrained(tiny_roberta)
    for name, tensor in clean.state_dict().items():
        assert torch.equal(_encoder_state(model)[name], tensor), name


def test_unrestorable_tensor_is_named(tiny_roberta):
    model = HeadFirst(tiny_roberta, meta_encoder=False)
    model.extra = nn.Linear(3, 3, device="meta")  # not in any checkpoint
    with pytest.raises(MetaTensorError) as info:
        safe_to_device(model, "cpu", checkpoint=tiny_roberta)
    assert info.value.names == ["extra.bias", "extra.weight"]


def test_real_model_moves_untouched(tiny_roberta):
    model = load_pretrained(tiny_roberta)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert safe_to_device(model, torch.device("cpu")) is model
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    store = tmp_path_factory.mktemp("dist") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_unwrap_model_through_every_wrapper(tiny_roberta, process_group):
    model = CriteriaClassifier(load_pretrained(tiny_roberta), HeadConfig())
    ddp = nn.parallel.DistributedDataParallel(model)
    compiled = torch.compile(model)
    for wrapped in (
        model,
        nn.DataParallel(model),
        ddp,
        compiled,
        nn.DataParallel(torch.compile(model)),
        torch.compile(nn.DataParallel(model)),
        torch.compile(ddp),
    ):
        assert unwrap_model(wrapped) is model
    wrapped = nn.DataParallel(model)
    with pytest.raises(AttributeError):
        _ = wrapped.pool  # the old system's crash: wrappers hide the model's own methods
    real = unwrap_model(wrapped)
    assert callable(real.pool) and isinstance(wrapped, nn.DataParallel), (
        "the wrapped reference is kept"
    )


def test_forward_through_data_parallel(tiny_roberta):
    model = CriteriaClassifier(load_pretrained(tiny_roberta), HeadConfig())
    wrapped = safe_to_device(nn.DataParallel(model), "cpu")
    logits = wrapped(
        input_ids=torch.tensor([[0, 5, 6, 2], [0, 7, 2, 1]]),
        attention_mask=torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
    )
    assert logits.shape == (2, 1)


# --- forward_keys ------------------------------------------------------------------------


class _Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)

    def forward(self, input_ids, attention_mask=None, *, labels=None):
        return self.linear(input_ids.float())


class _TakesAnything(nn.Module):
    def forward(self, input_ids, **kwargs):
        return input_ids


class _Peft(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.base_model = model  # not a `.module`: only get_base_model() reaches it

    def get_base_model(self):
        return self.base_model

    def forward(self, *args, **kwargs):
        return self.base_model(*args, **kwargs)


class _Compiled(nn.Module):
    """Stands in for torch.compile's OptimizedModule, which keeps the model as _orig_mod."""

    def __init__(self, model):
        super().__init__()
        self._orig_mod = model

    def forward(self, *args, **kwargs):
        return self._orig_mod(*args, **kwargs)


def test_forward_keys_of_a_plain_and_a_wrapped_model():
    expected = frozenset({"input_ids", "attention_mask", "labels"})
    assert forward_keys(_Classifier()) == expected
    assert forward_keys(nn.DataParallel(_Classifier())) == expected
    assert forward_keys(nn.DataParallel(_Peft(_Classifier()))) == expected
    assert forward_keys(_Compiled(_Classifier())) == expected


def test_forward_keys_is_none_when_forward_takes_kwargs():
    assert forward_keys(_TakesAnything()) is None
