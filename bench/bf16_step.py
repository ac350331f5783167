"""Where a bf16 training step loses its time (issue #50 item 3): the standard recipe's step,
profiled, its self CPU time split into categories, in bf16 autocast (the default on a CPU with
native bf16) and in float32, and the cheap fixes a practitioner would try, each timed alike.

    python -m bench.run --only bf16_step          # 2 rounds; every case once a round

One set-up (hardware_limit's recipe on the real-size realistic sample); every case steps the
same batches: one warm-up step (its optimizer is new), TIMED_STEPS timed steps, then
PROFILED_STEPS under ``torch.profiler``. Cases, alternated within each round so that all meet
the same load:

    float32       no autocast (the "no" precision)
    bf16          autocast bf16, AdamW as hpo builds it on CPU (neither foreach nor fused)
    bf16_foreach  AdamW(foreach=True)                        same numerics up to rounding
    bf16_fused    AdamW(fused=True)                          same numerics up to rounding
    bf16_eager    eager attention, not sdpa                  same numerics up to rounding
    bf16_threads1 torch.set_num_threads(1)                   same numerics
    bf16_weights  weights cast to bf16 once (a measure of autocast's casts, not a fix:
                  bf16 weights and optimizer state change training)

Utilisation = model FLOPs (hardware_limit's formula) / step seconds / the bf16 matmul peak
(hardware_limit's, 2048^2), for every case, float32 included, so the cases compare directly.
"""

from __future__ import annotations

import itertools
import os
import time
from contextlib import nullcontext

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from bench.hardware_limit import (
    example_flops,
    model_shape,
    native_bf16,
    peak_flops,
    recipe_setup,
)
from bench.results import write_results
from bench.workload import encoder_path, sample_data
from hpo.fixtures.realistic import REAL_POSTS

NAME = "bf16_step"
DEFINITION = (
    "model FLOP/s of the recipe's training step / the bf16 matmul peak, per precision and fix"
)
DEFAULTS = {"runs": 2}
TIMED_STEPS, PROFILED_STEPS = 3, 2
CASES = ("float32", "bf16", "bf16_foreach", "bf16_fused", "bf16_eager", "bf16_threads1")
CASES += ("bf16_weights",)
OUTSIDE = ("collation", "optimizer")  # annotated blocks: every op under them is theirs
CATEGORIES = {  # op name (aten:: stripped) -> category; the rest is "elementwise/other"
    "matmul": {"addmm", "mm", "bmm", "baddbmm", "matmul", "linear"},
    "attention": {
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        "softmax",
        "_softmax",
        "_softmax_backward_data",
    },
    "layer_norm": {"layer_norm", "native_layer_norm", "native_layer_norm_backward"},
    "activation": {"gelu", "gelu_backward", "tanh", "tanh_backward"},
    "dropout": {"dropout", "native_dropout", "native_dropout_backward", "bernoulli_"},
    "casts": {"to", "_to_copy", "copy_"},
    "embedding": {"embedding", "embedding_backward", "embedding_dense_backward"},
}
BY_OP = {op: category for category, ops in CATEGORIES.items() for op in ops}
# the encoder's linear layers at a micro-batch of the recipe's (16 x ~150 real tokens)
SHAPES = {"qkv_out 384->384": (384, 384), "ffn_up 384->1536": (384, 1536)}
SHAPES["ffn_down 1536->384"] = (1536, 384)
SHAPE_TOKENS, SHAPE_REPEATS = 2048, 10


def category(event) -> str:
    """An event's category: its annotated block's (collation, optimizer), else its op's;
    autograd nodes' and our step's own time is framework overhead."""
    parent = event
    while parent is not None:
        if parent.name in OUTSIDE:
            return parent.name
        parent = parent.cpu_parent
    name = event.name.removeprefix("aten::")
    if event.name == "step" or event.name.startswith("autograd::") or "Backward" in name:
        return "framework/Python"
    return BY_OP.get(name, "elementwise/other")


def annotate(setup) -> None:
    """Name the collation and optimizer blocks (AdamW, grad clip, schedule, zero_grad) for the
    profiler without touching hpo: wrap the set-up's collator and torch's clip."""
    collate = setup.collate

    def named_collate(features):
        with record_function("collation"):
            return collate(features)

    setup.collate = named_collate
    clip = torch.nn.utils.clip_grad_norm_

    def named_clip(*args, **kwargs):
        with record_function("optimizer"):
            return clip(*args, **kwargs)

    torch.nn.utils.clip_grad_norm_ = named_clip


def use_case(setup, case: str, autocast) -> None:
    """Put the set-up in ``case``'s configuration, with a new optimizer (as hpo builds it)."""
    from hpo.train.optim import param_groups

    torch.set_num_threads(1 if case == "bf16_threads1" else THREADS)
    setup.autocast = nullcontext if case == "float32" else autocast
    setup.model.to(torch.bfloat16 if case == "bf16_weights" else torch.float32)
    setup.model.encoder.set_attn_implementation("eager" if case == "bf16_eager" else "sdpa")
    kind = {"bf16_foreach": {"foreach": True}, "bf16_fused": {"fused": True}}.get(case, {})
    optimizer = torch.optim.AdamW(
        param_groups(setup.model, setup.config), lr=setup.config.learning_rate, **kind
    )
    step = optimizer.step

    def named_step(*args, **kwargs):  # scheduler.step and zero_grad run on the old optimizer,
        with record_function("optimizer"):  # cheap, and the same in every case
            return step(*args, **kwargs)

    optimizer.step = named_step
    setup.optimizer = optimizer


def run_case(setup, batches, flops: list[float], examples: list[int], linear: list[float]):
    """Warm-up, timed steps, profiled steps: the step's rate and its profile by category."""
    setup.step(batches[0])
    timed = range(1, 1 + TIMED_STEPS)
    started = time.perf_counter()
    for i in timed:
        setup.step(batches[i])
    seconds = time.perf_counter() - started
    profiled = range(1 + TIMED_STEPS, 1 + TIMED_STEPS + PROFILED_STEPS)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        started = time.perf_counter()
        for i in profiled:
            with record_function("step"):
                setup.step(batches[i])
        wall = time.perf_counter() - started
    shares: dict[str, float] = {}
    for event in prof.events():
        shares[category(event)] = shares.get(category(event), 0.0) + event.self_cpu_time_total
    recorded = sum(shares.values()) / 1e6
    shares = {name: us / 1e6 for name, us in shares.items()}
    shares["framework/Python"] = shares.get("framework/Python", 0.0) + max(0.0, wall - recorded)
    steps = len(profiled)
    return {
        "model_flops_per_s": sum(flops[i] for i in timed) / seconds,
        "steps_per_s": TIMED_STEPS / seconds,
        "examples_per_s": sum(examples[i] for i in timed) / seconds,
        "seconds_per_step": {k: round(v / steps, 4) for k, v in sorted(shares.items())},
        "share": {k: round(v / sum(shares.values()), 3) for k, v in sorted(shares.items())},
        "matmul_gflops": round(sum(linear[i] for i in profiled) / shares["matmul"] / 1e9, 1),
    }


def shape_gflops() -> dict[str, dict[str, float]]:
    """GFLOP/s of F.linear at the encoder's shapes (SHAPE_TOKENS rows), bf16 and float32,
    best of SHAPE_REPEATS: what 384-wide layers reach, against the square 2048^2 peak."""
    out = {}
    for name, (fan_in, fan_out) in SHAPES.items():
        for dtype, label in ((torch.bfloat16, "bf16"), (torch.float32, "float32")):
            x = torch.randn(SHAPE_TOKENS, fan_in).to(dtype)
            w = torch.randn(fan_out, fan_in).to(dtype)
            torch.nn.functional.linear(x, w)
            best = float("inf")
            for _ in range(SHAPE_REPEATS):
                started = time.perf_counter()
                torch.nn.functional.linear(x, w)
                best = min(best, time.perf_counter() - started)
            flops = 2 * SHAPE_TOKENS * fan_in * fan_out
            out.setdefault(name, {})[label] = round(flops / best / 1e9, 1)
    return out


THREADS = torch.get_num_threads()


def bf16_step(rounds: int) -> tuple[dict[str, list[dict]], dict]:
    from hpo.train.step import plan_units

    encoder, _ = encoder_path()
    data = sample_data(f"data-hardware-{REAL_POSTS}", REAL_POSTS)
    setup = recipe_setup(encoder, data, "bf16")
    autocast = setup.autocast
    annotate(setup)
    n, layers, hidden = model_shape(setup.model)
    train = setup.data.train
    batches = list(itertools.islice(setup.batches(1), 1 + TIMED_STEPS + PROFILED_STEPS))
    flops, examples, linear = [], [], []
    for batch in batches:
        units = plan_units(train.tokens, batch, train.num_labels, setup.score_chunks)
        lengths = train.tokens.sequence_lengths[units.sequences].tolist()
        flops.append(sum(example_flops(t, n, layers, hidden) for t in lengths))
        linear.append(6 * n * sum(lengths))  # the weights' share: the linear layers' work
        examples.append(len(batch))
    runs: dict[str, list[dict]] = {case: [] for case in CASES}
    profiles: dict[str, dict] = {}
    for round_ in range(rounds):
        for case in CASES:
            use_case(setup, case, autocast)
            got = run_case(setup, batches, flops, examples, linear)
            peak = peak_flops(torch.bfloat16)
            runs[case].append(
                {
                    "utilisation": round(got["model_flops_per_s"] / peak, 4),
                    "steps_per_s": round(got["steps_per_s"], 3),
                    "model_gflops": round(got["model_flops_per_s"] / 1e9, 1),
                    "bf16_peak_gflops": round(peak / 1e9, 1),
                    "examples_per_s": round(got["examples_per_s"], 2),
                }
            )
            if round_ == rounds - 1:  # the last round's profile: warm, after every case
                profiles[case] = {k: got[k] for k in ("seconds_per_step", "share")}
                profiles[case]["matmul_gflops"] = got["matmul_gflops"]
            print(f"[bf16_step round {round_ + 1}] {case}: {runs[case][-1]} {got}", flush=True)
    torch.set_num_threads(THREADS)
    return runs, {"profiles": profiles, "linear_gflops_at_shapes": shape_gflops()}


def measure(args) -> None:
    """``args.runs`` rounds, every case once a round; the profile of the last round."""
    if not native_bf16():  # emulated bf16 is slower than float32: nothing to learn here
        raise SystemExit("bf16_step: this CPU has no native bf16 (avx512_bf16 / AMX)")
    _, encoder_name = encoder_path()
    load = [round(x, 2) for x in os.getloadavg()]
    runs, found = bf16_step(args.runs)
    write_results(
        NAME,
        {
            "encoder": encoder_name,
            "data": f"{REAL_POSTS} generated realistic posts (seed 0), split 0.8/0.1/0.1",
            "recipe": "hardware_limit's (multilabel, head_tail, max_length 256)",
            "steps": f"per case and round: 1 warm-up, {TIMED_STEPS} timed, {PROFILED_STEPS} "
            "profiled, the same batches for every case",
            "utilisation": "model FLOPs / step s / bf16 matmul peak (2048^2), every case",
            "load_average_1_5_15_min_at_start": load,
            "profiles": "bench/results/bf16_step.json: details (self CPU s per step by category)",
        },
        runs,
        "utilisation",
        definition=DEFINITION,
        also=("steps_per_s", "model_gflops"),
        details=found,
        command=f"python -m bench.run --only {NAME}",
        fewer_runs={"at_least": 2, "why": "a profile of seven cases on a shared 2-core machine"},
    )
