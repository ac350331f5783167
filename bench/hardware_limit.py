"""How far is a trial from what this CPU can do? The standard recipe's training step's model
FLOP/s over the machine's own measured matmul peak, at the same thread count.

    python -m bench.run --only hardware_limit     # 5 runs; float32 (the recipe), bf16 where native

Model FLOPs of one training example (forward + backward), for a sequence of t tokens:

    6 * N * t  +  12 * L * t^2 * H

N: non-embedding parameters (encoder layers + head; 6 = 2 forward + 4 backward per weight and
token), L layers, H hidden size (12 = QK^T and AV, 2 * t^2 * H each, forward, times 3 with the
backward). t counts each sequence's real tokens, not padding: padding is work the hardware
does that the model does not need, so it shows up as a lower ratio.

Peak: the best of MATMUL_REPEATS ``torch.matmul`` of two square matrices (2 * n^3 FLOPs) at
``torch.get_num_threads()``, in float32, and in bf16 where the CPU has native bf16 units
(avx512_bf16 / AMX). One set-up per precision, one warm-up step; then each run times
TIMED_STEPS optimizer steps of the real recipe on realistic posts at the real set's size and
measures the peak right after; utilisation = model FLOPs / step seconds / peak of the same
precision.
"""

from __future__ import annotations

import time

import torch

from bench.common import RUNS
from bench.results import write_results
from bench.workload import RECIPE, encoder_path, sample_data
from hpo.fixtures.realistic import REAL_POSTS

NAME = "hardware_limit"
DEFINITION = (
    "model FLOP/s of the standard recipe's training step / the machine's measured matmul peak "
    "FLOP/s, same precision and threads"
)
MATMUL_N, MATMUL_REPEATS = 2048, 10  # ~17 GFLOP each: past cache effects, short under load
TIMED_STEPS = 2


def peak_flops(dtype: torch.dtype) -> float:
    """FLOP/s of the best of MATMUL_REPEATS large matmuls (after one warm-up)."""
    a = torch.randn(MATMUL_N, MATMUL_N).to(dtype)
    b = torch.randn(MATMUL_N, MATMUL_N).to(dtype)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(MATMUL_REPEATS):
        started = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - started)
    return 2 * MATMUL_N**3 / best


def native_bf16() -> bool:
    flags = open("/proc/cpuinfo").read().split()  # noqa: SIM115 - a one-off read
    return "avx512_bf16" in flags or "amx_bf16" in flags


def model_shape(model: torch.nn.Module) -> tuple[int, int, int]:
    """(non-embedding parameters, layers, hidden size) of a classifier over a BERT-like encoder."""
    encoder_config = model.encoder.config
    embedding = sum(
        p.numel() for name, p in model.named_parameters() if "embeddings" in name.split(".")
    )
    total = sum(p.numel() for p in model.parameters())
    return total - embedding, encoder_config.num_hidden_layers, encoder_config.hidden_size


def example_flops(t: int, n: int, layers: int, hidden: int) -> float:
    return 6 * n * t + 12 * layers * t * t * hidden


def recipe_setup(encoder: str, data_dir: str, precision: str):
    """The standard recipe (multilabel, head_tail, max_length 256) set up to step, in train
    mode; ``precision``: its mixed_precision ("no": float32, "bf16")."""
    from hpo.train.config import TrainConfig
    from hpo.train.setup import set_up

    config = TrainConfig(
        task="criteria",
        encoder=encoder,
        data_dir=data_dir,
        criteria_formulation="multilabel",
        max_length=256,
        mixed_precision=precision,
        threshold="fixed",
        objective_metric="post_macro_f1",
        split_fractions=(0.8, 0.1, 0.1),
        cache_dir=str(RUNS / "cache"),
        **RECIPE,
    )
    setup = set_up(config)
    setup.model.train()
    return setup


def step_windows(encoder: str, data_dir: str, precision: str, windows: int):
    """Model FLOP/s of ``windows`` successive windows of TIMED_STEPS optimizer steps of the
    standard recipe, one set-up for all (set-up is not the step); yields one dict a window."""
    from hpo.train.step import plan_units

    setup = recipe_setup(encoder, data_dir, precision)
    n, layers, hidden = model_shape(setup.model)
    tokens = setup.data.train.tokens
    batches = setup.batches(1)  # one epoch holds ~75 steps: enough for every window
    setup.step(next(batches))  # warm-up: first-call allocations and kernel choices
    for _ in range(windows):
        seconds, flops, examples, read = 0.0, 0.0, 0, 0
        for _, batch in zip(range(TIMED_STEPS), batches, strict=False):
            units = plan_units(tokens, batch, setup.data.train.num_labels, setup.score_chunks)
            lengths = tokens.sequence_lengths[units.sequences].tolist()
            started = time.perf_counter()
            setup.step(batch)
            seconds += time.perf_counter() - started
            flops += sum(example_flops(t, n, layers, hidden) for t in lengths)
            examples += len(batch)
            read += sum(lengths)
        yield {
            "examples_per_s": examples / seconds,
            "tokens_per_example": read / examples,
            "model_flops_per_example": flops / examples,
            "model_flops_per_s": flops / seconds,
            "non_embedding_parameters": n,
        }


def hardware_limit(runs: int) -> dict[str, list[dict]]:
    encoder, _ = encoder_path()
    data = sample_data(f"data-hardware-{REAL_POSTS}", REAL_POSTS)
    cases = {"float32": ("no", torch.float32)}
    if native_bf16():
        cases["bf16"] = ("bf16", torch.bfloat16)
    out: dict[str, list[dict]] = {case: [] for case in cases}
    for case, (precision, dtype) in cases.items():
        # each run: a window of steps, then the peak right after it, so both meet the same load
        for run, step in enumerate(step_windows(encoder, data, precision, runs)):
            peak = peak_flops(dtype)
            out[case].append(
                {
                    "utilisation": round(step["model_flops_per_s"] / peak, 4),
                    "peak_gflops": round(peak / 1e9, 1),
                    "model_gflops": round(step["model_flops_per_s"] / 1e9, 2),
                    "examples_per_s": round(step["examples_per_s"], 3),
                    "tokens_per_example": round(step["tokens_per_example"], 1),
                    "model_gflop_per_example": round(step["model_flops_per_example"] / 1e9, 3),
                    "threads": torch.get_num_threads(),
                    "non_embedding_parameters": step["non_embedding_parameters"],
                }
            )
            print(f"[hardware_limit run {run + 1}] {case}: {out[case][-1]}", flush=True)
    return out


def measure(args) -> None:
    """``args.runs`` windows of steps per precision, each with the peak measured right after."""
    _, encoder_name = encoder_path()
    write_results(
        NAME,
        {
            "encoder": encoder_name,
            "data": f"{REAL_POSTS} generated realistic posts (seed 0), split 0.8/0.1/0.1",
            "recipe": {**RECIPE, "max_length": 256, "criteria_formulation": "multilabel"},
            "formula": "model FLOPs per example = 6 * N * t + 12 * L * t^2 * H (forward + "
            "backward; N non-embedding parameters, L layers, H hidden, t real tokens)",
            "peak": f"best of {MATMUL_REPEATS} torch.matmul {MATMUL_N}x{MATMUL_N} at the same "
            "thread count, same precision",
            "timed_steps": TIMED_STEPS,
        },
        hardware_limit(args.runs),
        "utilisation",
        definition=DEFINITION,
        also=("model_gflops", "peak_gflops", "examples_per_s"),
        command=f"python -m bench.run --only {NAME}",
    )
