"""What the shipped supermax specs cost on this machine: ``hpo validate --estimate``'s own
timing (a few real optimizer steps, scaled by the tokens an epoch reads) of each spec's
standard-recipe warm start, per encoder.

    python -m bench.run --only sizing

The hub checkpoints (roberta-base, deberta-v3-base) cannot be downloaded here, so each is
stood in for by an encoder of the same shape (layers, widths, heads, attention kind) with
random weights and the offline MiniLM's WordPiece tokenizer: a step's arithmetic depends on
the shape and the token count, not on the weights. The data is generated realistic posts,
as many as the real ReDSM5 (1,484), so an epoch reads about as many tokens as on it.
"""

from __future__ import annotations

import shutil

from bench.common import REPO, RUNS
from bench.results import write_results
from bench.workload import described, encoder_path, sample_data

NAME = "sizing"
DEFINITION = (
    "hpo validate --estimate's figures for the spec's standard recipe: seconds of one trial "
    "(set-up + its epochs of training and validation)"
)
FEWER_RUNS = {
    "at_least": 1,
    "why": "an order of magnitude for the specs' comments: hpo validate --estimate's own "
    "timing of a few optimizer steps per encoder, not a headline",
}
SPECS = ("criteria-supermax", "evidence-supermax")
REDSM5_POSTS = 1484
SHAPES = {  # the base checkpoints' configs, as published on their model cards
    "roberta-base": {
        "model_type": "roberta",
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "max_position_embeddings": 514,
        "pad_token_id": 0,
    },
    "microsoft/deberta-v3-base": {
        "model_type": "deberta-v2",
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
        "relative_attention": True,
        "position_buckets": 256,
        "norm_rel_ebd": "layer_norm",
        "share_att_key": True,
        "pos_att_type": ["p2c", "c2p"],
        "position_biased_input": False,
        "max_relative_positions": -1,
        "type_vocab_size": 0,
    },
}


def measure(args) -> None:
    """One run: the estimate times a few optimizer steps itself; MiniLM lends its tokenizer."""
    write_results(
        NAME,
        described(
            "roberta-base and deberta-v3-base shapes, random weights, MiniLM's tokenizer",
            f"{REDSM5_POSTS} generated realistic posts (ReDSM5's count and post lengths)",
            shape="each supermax spec's warm-start recipe, one worker with every core",
        ),
        sizing(encoder_path()[0]),
        "recipe_trial_s",
        None,
        definition=DEFINITION,
        also=("epoch_s", "study_s"),
        command=f"python -m bench.run --only {NAME}",
        fewer_runs=FEWER_RUNS,
    )


def shaped_encoder(name: str, tokenizer_dir: str) -> str:
    """A random-weight encoder of ``name``'s shape, saved with MiniLM's tokenizer."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    folder = RUNS / "shapes" / name.replace("/", "--")
    if (folder / "config.json").exists():
        return str(folder)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    shape = dict(SHAPES[name])
    config = AutoConfig.for_model(shape.pop("model_type"), vocab_size=len(tokenizer), **shape)
    AutoModel.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def sizing(tokenizer_dir: str, workers: int = 1) -> dict[str, list[dict]]:
    """Per spec and encoder, the estimate's figures (seconds) for the warm-start recipe."""
    from hpo.run.estimate import time_configs
    from hpo.spec import load_spec
    from hpo.study.search import sample_points

    data = sample_data(f"data-{REDSM5_POSTS}", REDSM5_POSTS)
    paths = [f"model_paths.{name}={shaped_encoder(name, tokenizer_dir)}" for name in SHAPES]
    runs: dict[str, list[dict]] = {}
    for spec_name in SPECS:
        cache = RUNS / "cache-sizing"
        spec = load_spec(
            str(REPO / "studies" / f"{spec_name}.yaml"),
            [f"data_dir={data}", f"train.cache_dir={cache}", *paths],
        )
        sampled = sample_points(spec, len(spec.warm_start))
        for recipe, point in zip(spec.warm_start, sampled, strict=True):
            params = {**point, **recipe}
            params = {k: v for k, v in params.items() if spec.applies(k, params)}
            encoder = str(params.get("encoder", spec.train.get("encoder")))
            (estimate,) = time_configs(spec, {encoder: spec.train_config(params, None)}, workers)
            epoch = estimate["epoch_train_s"] + estimate["epoch_validation_s"]
            runs[f"{spec_name} {estimate['name']}"] = [
                {
                    **estimate,
                    "epoch_s": epoch,
                    "recipe_trial_s": estimate["setup_s"] + params["epochs"] * epoch,
                    "recipe": {k: params[k] for k in ("learning_rate", "batch_size", "epochs")},
                }
            ]
        shutil.rmtree(cache, ignore_errors=True)
    return runs
