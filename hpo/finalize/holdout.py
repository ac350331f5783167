"""The held-out test split, scored once for a saved model. Only ``hpo finalize`` calls this:
no trial of a search ever sees the test split."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from hpo.data.collate import Collator
from hpo.errors import UsageError
from hpo.models.classifier import load_classifier_on
from hpo.models.classifier_file import read_inference
from hpo.models.device import forward_keys
from hpo.models.hardware import resolve_device
from hpo.train.config import TrainConfig
from hpo.train.evaluate import per_symptom, score, split_probabilities
from hpo.train.prepare import prepare_data


@dataclass(frozen=True)
class TestScore:
    metrics: dict[str, float]  # at 0.5, and tuned_* at the validation thresholds
    per_symptom: dict[str, dict]  # at the model's decision thresholds
    thresholds: dict[str, float]  # the decision thresholds, chosen on validation only
    split_sizes: dict[str, dict[str, int]]  # per split: posts and examples


def score_on_test(config: TrainConfig, model_dir: str | Path) -> TestScore:
    """``model_dir`` (a ``save_classifier`` folder) on the test split of ``config``'s data,
    through the same meta-safe load and transfer as training."""
    data = prepare_data(config)
    if data.test is None:
        raise UsageError(
            "the split gives the test split no posts; "
            "set train.split_fractions so its third share is > 0"
        )
    device = resolve_device(config.device)
    model, _ = load_classifier_on(model_dir, device)
    inference = read_inference(model_dir)
    collate = Collator(data.tokenizer.pad_token_id, keep_keys=forward_keys(model))
    with torch.inference_mode():
        probs = split_probabilities(
            model,
            data.test.tokens,
            collate,
            config.eval_batch_size,
            device,
            max_tokens=config.inference_token_budget(device.type),
        )
    evaluation = score(data.test, probs, thresholds=inference.validation_thresholds)
    decision = dict(inference.thresholds)
    sizes = {
        name: {"posts": len(set(split.post_ids)), "examples": len(split)}
        for name in ("train", "validation", "test")
        if (split := getattr(data, name)) is not None
    }
    return TestScore(evaluation.metrics, per_symptom(data.test, probs, decision), decision, sizes)
