"""What this machine offers a trial: its devices, GPUs and native number formats.

Imports torch alone (no transformers), so the launcher's checks can ask without loading the
training stack — that costs seconds, and the launcher does it while workers start.
"""

from __future__ import annotations

from pathlib import Path

import torch

from hpo.errors import UsageError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


# Where an NVIDIA driver shows its GPUs, whatever torch was built for
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")
GPU_INSTALL = "make install TORCH_SPEC=torch TORCH_INDEX=https://download.pytorch.org/whl/cu128"


def unused_gpu_warning(gpus: Path = NVIDIA_GPUS) -> str | None:
    """A line when the machine has an NVIDIA GPU that this torch cannot use (a CPU wheel, or a
    CUDA build the driver is too old for): trials would train on the CPU without a word."""
    try:
        present = any(gpus.iterdir())
    except OSError:
        return None
    if not present or torch.cuda.is_available():
        return None
    return (
        f"warning: this machine has an NVIDIA GPU, but torch {torch.__version__} cannot use it "
        f"(built for CUDA: {torch.version.cuda or 'no'}): trials train on the CPU; "
        f"for the GPU: {GPU_INSTALL}"
    )


def check_gpus(wanted: int) -> None:
    """Raise a one-line UsageError when a trial wants ``wanted`` > 1 GPUs (DataParallel) and
    this process sees fewer; one device, CPU included, always works.

    Otherwise the shortfall would surface later as an opaque DataParallel error.
    """
    if wanted <= 1:
        return
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if available < wanted:
        raise UsageError(
            f"gpus_per_trial={wanted} needs {wanted} GPUs, but this process sees {available}; "
            "set gpus_per_trial: 1 or give each worker more GPUs"
        )


def cpu_has_native_bf16() -> bool:
    """AVX-512 bf16 or AMX: where bf16 matmuls run 2-3x faster than float32. Without them
    (AVX2-only CPUs) bf16 is emulated and slower than float32."""
    probes = (
        "_is_avx512_bf16_supported",
        "_is_amx_tile_supported",
    )  # private, so looked up defensively
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)
