"""Everything a run would reject, checked before a study exists (``hpo validate`` and the
start of ``hpo tune``): one line naming the problem and the fix, and nothing created."""

from __future__ import annotations

import os
from pathlib import Path

from hpo.errors import UsageError
from hpo.spec import StudySpec
from hpo.validation import located
from hpo.vocabulary import TRAITS


def preflight(spec: StudySpec, notes: bool = True) -> list[str]:
    """Everything a run would reject, checked before a study exists: the sampler and pruner
    sample a few points, each point makes a valid TrainConfig, the device and GPUs exist,
    output_dir is writable, the storage answers (read-only), the data loads and splits with
    a train and a validation part, every encoder can be found and its tokenizer fits the
    criterion texts at the shortest max_length. Raises UsageError; returns notes for the user
    (``hpo validate``). ``notes=False`` (a run's start): no notes, and the checks on the
    data, devices and encoders are skipped where a receipt says identical ones passed."""
    from hpo.run.receipt import receipt_path, write_receipt
    from hpo.study.storage import check_storage

    configs = sampled_configs(spec)
    _check_writable(spec.output_dir)
    storage_note = check_storage(spec.storage)  # connects, creates nothing
    receipt = receipt_path(spec, configs)
    if not notes and receipt is not None and receipt.exists():
        return []
    found = [storage_note, *_check_inputs(spec, configs, notes)]
    write_receipt(receipt)
    return found


def _check_inputs(spec: StudySpec, configs: list, notes: bool) -> list[str]:
    """The data, the devices and the encoders, as ``preflight`` says; the notes on posts'
    token lengths (every post tokenized with each encoder) only where ``notes``."""
    from hpo.data import (
        load_descriptions,
        load_redsm5,
        split_posts,
        symptom_profiles,
    )

    first = configs[0]
    corpus = load_redsm5(spec.data_dir)
    posts = split_posts(symptom_profiles(corpus), first.split_fractions, seed=first.split_seed)
    posts.require(("train", "validation"), first.split_fractions)
    # torch from here on: slow to import, so checked last
    from hpo.models.hardware import check_gpus, unused_gpu_warning
    from hpo.models.loading import check_weights
    from hpo.train.formulations import build_examples

    # Both tasks pair every criterion text with a text: the (cheap) criteria pairs show whether
    # they fit.
    examples = build_examples(corpus, "criteria", load_descriptions(first.descriptions_path))

    check_gpus(spec.gpus_per_trial)
    unused_gpu = unused_gpu_warning()
    devices = {config.device for config in configs} | set(map(str, _every_value(spec, "device")))
    for device in sorted(devices):
        _check_device(device, spec.gpus_per_trial)
    found = [
        f"{len(corpus.posts)} posts in {spec.data_dir}, shared by both tasks: "
        f"{len(posts.train)} train, {len(posts.validation)} validation, {len(posts.test)} test",
    ]
    if unused_gpu:
        found.append(unused_gpu)
    found += _ignored_settings(spec, configs)
    if not posts.test:  # a search needs none; hpo finalize refuses the study before retraining
        found.append(
            f"warning: the test split is empty (split_fractions {list(first.split_fractions)}): "
            "hpo finalize will refuse this study; give the test split a fraction to finalize it"
        )
    texts = [post.text for post in corpus.posts.values()]
    for name in spec.encoders:
        path = str(spec.model_paths.get(name, name))
        found.append(f"encoder {name}: {_check_encoder(str(name), path)}")
        _check_search_fits(spec, str(name), path)
        _check_lengths(str(name), path, examples, _shortest_max_length(spec, first.max_length))
        check_weights(str(name), path)  # last: the config's own checks name the key to fix
        if notes:
            found += _long_tail(str(name), path, texts, spec, configs)
    return found


def sampled_configs(spec: StudySpec) -> list:
    """The TrainConfigs of the warm start and a few points the spec's own sampler draws
    (UsageError if one is not a valid training setting)."""
    from hpo.study.search import sample_points

    return [
        _train_config(spec, point, "warm start" if index < len(spec.warm_start) else "sampled")
        for index, point in enumerate(sample_points(spec))
    ]


def _ignored_settings(spec: StudySpec, configs: list) -> list[str]:
    """A warning per fixed training setting that no sampled trial's formulation reads
    (``pooling`` beside whole_post, ``post_pooling`` beside multilabel): not wrong, but not
    what its author meant either."""
    from hpo.train.config import READ_BY

    never = set.intersection(*(set(config.ignored(spec.train)) for config in configs))
    return [
        f"warning: train.{name} is read by {', '.join(READ_BY[name])} only, and no trial of "
        "this study is one: it changes nothing; leave it out"
        for name in sorted(never)
    ]


def _train_config(spec: StudySpec, point: dict, origin: str):
    try:
        return spec.train_config(point, None)
    except ValueError as exc:  # pydantic's ValidationError is one
        problem = str(exc)
        if hasattr(exc, "errors"):
            path, problem = located(exc.errors()[0])
            problem = f"{path.split('.')[0]}: {problem}" if path else problem
        raise UsageError(
            f"{spec.source}: the {origin} point {point} is not a valid training setting: {problem}"
        ) from None


def _check_device(name: str, gpus_per_trial: int) -> None:
    """A device a trial can train on here: the CPU, or a CUDA GPU its worker will see (the
    launcher gives each worker its own ``gpus_per_trial`` GPUs, numbered from cuda:0)."""
    import torch

    from hpo.models.hardware import resolve_device

    try:
        device = resolve_device(name)
    except RuntimeError as exc:
        raise UsageError(
            f"train.device={name!r} is not a device: {str(exc).splitlines()[0]}; "
            "use auto, cpu, cuda or cuda:N"
        ) from None
    if device.type not in ("cpu", "cuda"):
        raise UsageError(
            f"train.device={name!r}: trials train on the CPU or CUDA GPUs only; "
            "use auto, cpu, cuda or cuda:N"
        )
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"train.device={name!r} but this machine has no CUDA GPU; use auto or cpu")
    seen = min(torch.cuda.device_count(), gpus_per_trial) if device.type == "cuda" else 0
    if device.type == "cuda" and (device.index or 0) >= seen:
        raise UsageError(
            f"train.device={name!r} but each trial sees {seen} GPU(s), cuda:0 to cuda:{seen - 1} "
            "(every worker gets its own); use cuda or auto"
        )


def _every_value(spec: StudySpec, field: str, encoder: str | None = None) -> list:
    """Every value TrainConfig ``field`` can take in a trial (one that trains ``encoder``,
    where given): the fixed one, or the searched range's ends or choices, plus the fixed one
    where a condition can leave the parameter unsampled."""

    fixed = spec.setting(field)
    param = spec.search_space.get(field)
    if param is None:
        return [fixed]
    only_for = (param.when or {}).get("encoder")
    if encoder is not None and only_for is not None and encoder not in only_for:
        return [fixed]
    ends = list(param.choices) if hasattr(param, "choices") else [param.low, param.high]
    return [*ends, fixed] if param.when else ends


def _check_search_fits(spec: StudySpec, name: str, path: str) -> None:
    """Every max_length and freeze_layers a trial of encoder ``name`` can get fits it, judged
    from its config alone (no weights): past its positions every trial would fail with an
    IndexError, past its depth with a ValueError, after the study was created."""
    from transformers import AutoConfig

    from hpo.models.limits import layer_count, not_an_encoder, position_limit

    try:
        config = AutoConfig.from_pretrained(path)
    except Exception as exc:  # an unknown model_type, a broken config.json: trials would fail too
        raise UsageError(
            f"encoder {name!r}: cannot read its config from {path}: "
            f"{(str(exc).strip().splitlines() or [type(exc).__name__])[0]}"
        ) from None
    if why := not_an_encoder(config):
        raise UsageError(
            f"encoder {name!r}: {path} is a {config.model_type} model, {why}; point "
            f"model_paths.{name} at an encoder (BERT, RoBERTa, DeBERTa-v3 or the like)"
        )
    for field, limit, unit in (
        ("max_length", position_limit(config), "positions"),
        ("freeze_layers", layer_count(config), "layers"),
    ):
        wanted = max(_every_value(spec, field, name))
        if limit is not None and wanted > limit:
            where = f"search_space.{field}" if field in spec.search_space else f"train.{field}"
            raise UsageError(
                f"{where}: {field}={wanted} but encoder {name!r} has {limit} {unit}; "
                f"use at most {limit} for it"
            )


def _check_writable(output_dir: str) -> None:
    """Writable, judged at the nearest folder that exists, so checking creates nothing."""
    import tempfile

    path = Path(output_dir).absolute()
    existing = next(folder for folder in (path, *path.parents) if folder.exists())
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, f"{existing} is a file, not a folder")
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as exc:
        raise UsageError(
            f"output_dir {output_dir}: {exc.strerror}; point output_dir at a writable folder"
        ) from None


def _shortest_max_length(spec: StudySpec, fixed: int) -> int:
    searched = spec.search_space.get("max_length")
    if searched is None:
        return fixed
    return int(min(searched.choices) if hasattr(searched, "choices") else searched.low)


def searched_values(spec: StudySpec, name: str, fixed) -> list:
    param = spec.search_space.get(name)
    if param is None:
        return [fixed]
    return sorted(param.choices) if hasattr(param, "choices") else [param.low, param.high]


def _long_tail(name: str, path: str, posts: list[str], spec: StudySpec, configs: list) -> list[str]:
    """The post lengths the study will meet, in this encoder's tokens, the chunks per post
    at each max_length searched, and what the largest training step holds: real posts are
    long-tailed (p99 ~30x the median), and a step over the longest ones sets a worker's memory."""
    import numpy as np

    from hpo.data.tokenize import chunks_per_text
    from hpo.models.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(path)
    lengths = np.array(
        [len(ids) for ids in tokenizer(posts, add_special_tokens=False, verbose=False)["input_ids"]]
    )
    p50, p99 = np.percentile(lengths, [50, 99])
    notes = [
        f"encoder {name}: posts are {p50:,.0f} / {p99:,.0f} / {lengths.max():,} tokens "
        "(p50 / p99 / max)"
    ]
    first = configs[0]
    max_lengths = searched_values(spec, "max_length", first.max_length)
    if any(config.long_text == "chunks" for config in configs) or "long_text" in spec.search_space:
        specials = tokenizer.num_special_tokens_to_add(pair=False)
        for max_length in max_lengths:
            chunks = chunks_per_text(lengths, max_length - specials)
            c50, c99 = np.percentile(chunks, [50, 99])
            notes.append(
                f"  long_text=chunks at max_length {max_length}: {c50:.0f} / {c99:.0f} / "
                f"{chunks.max()} chunks per post (p50 / p99 / max), {chunks.sum():,} in all"
            )
    formulations = searched_values(spec, "criteria_formulation", first.criteria_formulation)
    if spec.task == "criteria" and any(TRAITS[f].scores_sentences for f in formulations):
        specials = tokenizer.num_special_tokens_to_add(pair=False)
        for max_length in max_lengths:
            # a lower bound: whole sentences leave a window's end unfilled now and then
            windows = -(-np.maximum(lengths, 1) // (max_length - specials))
            w50, w99 = np.percentile(windows, [50, 99])
            notes.append(
                f"  whole_post at max_length {max_length}: about {w50:.0f} / {w99:.0f} / "
                f"{windows.max()} windows of whole sentences per post (p50 / p99 / max), "
                f"{windows.sum():,} in all: every token read"
            )
    batch = max(searched_values(spec, "batch_size", first.batch_size))
    sequences = max(config.micro_batch_size or batch for config in configs)
    estimate = _step_memory_mb(path, max(max_lengths), sequences)
    if estimate is not None:
        notes.append(
            f"  a training step holds at most {sequences} sequences of {max(max_lengths)} tokens "
            f"(chunks beyond each label's strongest are scored without a graph): about "
            f"{estimate:,.0f} MiB of activations in float32, plus the model and its optimizer state"
        )
    return notes


def _step_memory_mb(path: str, tokens: int, sequences: int) -> float | None:
    """Activations a transformer keeps for backward, per layer s*b*h*(34 + 5*a*s/h) bytes at 16 bits
    (Korthikanti et al., 2022), doubled for float32; None when the config is unreadable."""
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(path)
        hidden, layers, heads = (
            config.hidden_size,
            config.num_hidden_layers,
            config.num_attention_heads,
        )
    except Exception:  # an unusual config: the estimate is a note, not a check
        return None
    per_layer = tokens * sequences * hidden * (34 + 5 * heads * tokens / hidden) * 2
    return layers * per_layer / 2**20


def _check_lengths(name: str, path: str, examples: list, max_length: int) -> None:
    """Tokenize one example per criterion text at ``max_length``: the tokenizer loads, and
    every criterion leaves room for its post."""
    from hpo.data.tokenize import tokenize_pairs
    from hpo.models.tokenizer import load_tokenizer

    sample = list({example.text_a: example for example in examples}.values())
    try:
        tokenizer = load_tokenizer(path)
    except UsageError as exc:  # it does not fit the model: the reason names the folder
        raise UsageError(f"encoder {name!r}: {exc}") from None
    except Exception as exc:  # a folder without tokenizer files, a converter that is missing
        raise UsageError(
            f"encoder {name!r}: cannot load its tokenizer from {path}: "
            f"{(str(exc).strip().splitlines() or [type(exc).__name__])[0]}"
        ) from None
    try:
        tokenize_pairs(
            tokenizer,
            [(e.text_a, e.text_b) for e in sample],
            [e.label for e in sample],
            max_length,
            cache_key=f"preflight|{path}",
        )
    except UsageError as exc:
        raise UsageError(f"encoder {name!r}: {exc}") from None


def _check_encoder(name: str, path: str) -> str:
    local = Path(path)
    if local.exists():
        if not (local / "config.json").is_file():
            raise UsageError(
                f"encoder {name!r}: {path} has no config.json; point model_paths.{name} at a "
                "saved model"
            )
        return f"local {path}"
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        cached = try_to_load_from_cache(path, "config.json")
    except HFValidationError:  # e.g. an absolute path that does not exist: not a hub id either
        raise UsageError(
            f"encoder {name!r}: {path} does not exist and is not a hub model id; "
            f"use --set model_paths.{name}=/path/to/model"
        ) from None
    if isinstance(cached, str):
        return f"hub {path} (cached)"
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise UsageError(
            f"encoder {name!r}: {path} is neither a local directory nor in the hub cache, and "
            f"HF_HUB_OFFLINE=1; use --set model_paths.{name}=/path/to/model"
        )
    return f"hub {path} ({_download(name, path)})"


def _download(name: str, repo_id: str) -> str:
    """Fetch the encoder into the hub cache once, here, before any worker starts: a worker
    that cannot fetch it would fail every trial after a long wait instead."""
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(repo_id, ignore_patterns=_NOT_PYTORCH)
    except Exception as exc:  # offline, unknown id, gated repo, no space: all end the same way
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(
            f"encoder {name!r}: cannot download {repo_id} from the hub ({reason}); check the id "
            f"and the network, or use --set model_paths.{name}=/path/to/model"
        ) from None
    return "downloaded to the hub cache"


# Weights for other frameworks: a checkpoint often ships several; fine-tuning here needs none
# of them.
_NOT_PYTORCH = [
    "*.h5",
    "*.msgpack",
    "*.onnx",
    "onnx/*",
    "*.ot",
    "*.tflite",
    "flax_model*",
    "tf_model*",
    "rust_model*",
    "coreml/*",
    "openvino/*",
]
