"""The machine's GPUs: enough for gpus_per_trial or one line naming the shortfall, and a GPU
this torch cannot use said with the install that fixes it."""

from __future__ import annotations

import pytest
import torch

from hpo.errors import UsageError
from hpo.models.hardware import check_gpus


@pytest.mark.parametrize(
    "cuda, count, wanted, sees", [(False, 2, 2, 0), (True, 1, 2, 1), (True, 3, 4, 3)]
)
def test_check_gpus_names_the_shortfall_in_one_line(monkeypatch, cuda, count, wanted, sees):
    # CUDA unavailable counts as no GPU, whatever device_count would say
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    with pytest.raises(UsageError) as caught:
        check_gpus(wanted)
    message = str(caught.value)
    assert f"gpus_per_trial={wanted} needs {wanted} GPUs" in message and f"sees {sees}" in message
    assert "\n" not in message


def test_check_gpus_passes_when_enough_are_visible(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    check_gpus(1)
    check_gpus(2)


def test_a_gpu_this_torch_cannot_use_is_said_with_the_install_that_fixes_it(tmp_path):
    """Issue #55 item 13: a CUDA machine with a CPU torch trained on the CPU without a word.
    The driver's GPU list is the input; this CPU torch cannot use a GPU it names."""
    import torch

    from hpo.models.hardware import unused_gpu_warning

    gpus = tmp_path / "gpus"
    assert unused_gpu_warning(gpus) is None, "no NVIDIA driver: nothing to say"
    gpus.mkdir()
    assert unused_gpu_warning(gpus) is None, "a driver that lists no GPU: nothing to say"
    (gpus / "0000:00:1e.0").mkdir()
    said = unused_gpu_warning(gpus)
    if torch.cuda.is_available():
        assert said is None
    else:
        assert said.startswith("warning: this machine has an NVIDIA GPU, but torch ")
        assert "trials train on the CPU" in said and "TORCH_INDEX=" in said
