"""P5 (only where a GPU exists): training tokens/s of the service's loop against the
Trainer baseline for a roberta-base-sized encoder at sequence length 256, and the model
FLOPs utilisation (6 x parameters x tokens/s over the GPU's dense bf16 peak).

    python -m bench.run --only p5
"""

from __future__ import annotations

import json
import sys

from bench.common import RUNS, repeated, timed_run
from bench.workload import described, encoder_path, sample_data

NAME = "p5"
DEFINITION = (
    "GPU training tokens/s, service loop / Trainer (roberta-base shape, length 256); MFU beside it"
)
TARGET = {"at_least": 1.5}
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def measure(args) -> None:
    """A first run (it builds the encoder), then ``args.runs`` runs; none without a GPU."""
    first = throughput()
    if "skipped" in first:  # no results file: the table says "not measured", never a stale figure
        print(first["skipped"])
        return
    load = described(encoder_path()[1], "400 generated realistic posts")
    repeated(NAME, throughput, args.runs, load, DEFINITION, TARGET)


def throughput() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"skipped": "P5 skipped: no GPU on this machine"}
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    from hpo.fixtures import make_tiny_encoder
    from hpo.train.config import TrainConfig
    from hpo.train.loop import train

    encoder = RUNS / "roberta-base-random"  # roberta-base's shape; weights do not change the speed
    if not (encoder / "config.json").exists():
        tokenizer_dir = make_tiny_encoder(
            "roberta", RUNS / "p5-tokenizer", vocab_size=8000, force=True
        )  # scratch
        RobertaModel(
            RobertaConfig(vocab_size=len(RobertaTokenizer.from_pretrained(tokenizer_dir))),
            add_pooling_layer=False,
        ).save_pretrained(encoder)
        RobertaTokenizer.from_pretrained(tokenizer_dir).save_pretrained(encoder)
    data_dir = sample_data("data-p5", 400)
    # one data set for both sides: the service trains on it, and its tokens per sample turn
    # samples/s into tokens/s
    fields = dict(
        task="criteria",
        encoder=str(encoder),
        data_dir=data_dir,
        max_length=256,
        split_fractions=(0.8, 0.1, 0.1),
    )
    result = train(TrainConfig(**fields, epochs=1, batch_size=32))
    from hpo.train.prepare import prepare_data

    data = prepare_data(TrainConfig(**fields))
    tokens_per_sample = float(data.train.tokens.lengths.mean())
    service_tps = result.train_samples_per_second * tokens_per_sample
    out = RUNS / "p5-trainer.json"
    timed_run(
        [
            sys.executable,
            "-m",
            "bench.trainer_baseline",
            str(encoder),
            data_dir,
            "--trials",
            "1",
            "--epochs",
            "1",
            "--max-length",
            "256",
            "--fractions",
            "0.8",
            "0.1",
            "0.1",
            "--bf16",
            "--out",
            str(out),
        ]
    )
    trainer = json.loads(out.read_text())
    trainer_tps = trainer["train_samples_per_second"] * tokens_per_sample
    params = sum(p.numel() for p in RobertaModel.from_pretrained(encoder).parameters())
    name = torch.cuda.get_device_name()
    peak = next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)
    return {
        "ratio": service_tps / trainer_tps,
        "service_tokens_per_s": service_tps,
        "trainer_tokens_per_s": trainer_tps,
        "mfu": 6 * params * service_tps / peak if peak else float("nan"),
        "gpu": name,
        "command": "python -m bench.run --only p5",
    }
