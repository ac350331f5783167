"""The baseline: transformers.Trainer.hyperparameter_search with the Optuna backend, written
as a new user would from the documentation, on exactly the service's examples and split:
(criterion, post) pairs, the formulation a two-class sequence classifier takes. Each trial is
scored and chosen by the post-level macro-F1 over the nine symptoms (the ReDSM5 paper's
figure), computed by the service's own metric code, so both sides report the same number.

It trains as the service does with ``class_weighting: balanced``: the loss weighs the rare
positive pairs by negatives / positives, through Trainer's documented ``compute_loss`` hook
(without it, a few epochs of unweighted loss predict no symptom at all and score 0.000).
Batches are padded per batch (``DataCollatorWithPadding``, what Trainer uses given a
tokenizer), as the service pads. Every evaluation's wall-clock time is recorded, so the
bench can tell when the search first reached a given macro-F1.

    python -m bench.trainer_baseline ENCODER DATA_DIR --trials 2 --epochs 1 --max-length 128 \\
        --out result.json
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import numpy as np
import optuna
import torch
from sklearn.metrics import f1_score
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from hpo.data import (
    SYMPTOMS,
    load_descriptions,
    load_redsm5,
    partition,
    split_posts,
    symptom_profiles,
)
from hpo.train.formulations import build_examples
from hpo.train.metrics import criteria_metrics


class PairDataset(torch.utils.data.Dataset):
    def __init__(self, encodings, labels):
        self.encodings, self.labels = encodings, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):  # unpadded: the collator pads each batch to its longest
        return {**{k: v[i] for k, v in self.encodings.items()}, "labels": self.labels[i]}


class WeightedTrainer(Trainer):
    """Cross-entropy with per-class weights, the documented way to weigh a rare class."""

    def __init__(self, *args, class_weights: torch.Tensor, **kwargs):
        super().__init__(*args, **kwargs)
        self.class_weights = class_weights

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        loss = torch.nn.functional.cross_entropy(
            outputs.logits, labels, weight=self.class_weights.to(labels.device)
        )
        return (loss, outputs) if return_outputs else loss


class EvaluationTimes(TrainerCallback):
    """The wall-clock time (time.time()) and post macro-F1 of every evaluation."""

    def __init__(self):
        self.evaluations = []

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.evaluations.append(
            {
                "time": time.time(),
                "epoch": state.epoch,
                "post_macro_f1": (metrics or {}).get("eval_post_macro_f1"),
            }
        )


def balanced_weights(labels) -> torch.Tensor:
    """(1, negatives / positives): the service's ``class_weighting: balanced`` for two classes."""
    counts = Counter(labels)
    return torch.tensor([1.0, counts[0] / max(counts[1], 1)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("encoder")
    parser.add_argument("data_dir")
    parser.add_argument("--task", default="criteria")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--fractions", type=float, nargs=3, default=(0.6, 0.3, 0.1))
    parser.add_argument(
        "--bf16", action="store_true", help="bf16 mixed precision (GPUs, CPUs with native bf16)"
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    started = time.perf_counter()

    corpus = load_redsm5(args.data_dir)
    # the service's split (split_seed 0)
    posts = split_posts(symptom_profiles(corpus), tuple(args.fractions), seed=0)
    splits = partition(build_examples(corpus, args.task, load_descriptions()), posts)
    tokenizer = AutoTokenizer.from_pretrained(args.encoder)

    def encode(rows):
        enc = tokenizer(
            [e.text_a for e in rows],
            [e.text_b for e in rows],
            truncation="only_second",
            max_length=args.max_length,
        )
        return PairDataset(dict(enc), [e.label for e in rows])

    train, validation = encode(splits.train), encode(splits.validation)

    def model_init(trial=None):
        return AutoModelForSequenceClassification.from_pretrained(args.encoder, num_labels=2)

    def compute_metrics(pred):
        logits = torch.as_tensor(pred.predictions, dtype=torch.float32)
        probs = torch.softmax(logits, dim=-1)[:, 1].numpy()
        return {
            "macro_f1": f1_score(
                pred.label_ids, np.argmax(pred.predictions, axis=-1), average="macro"
            ),
            **post_level(splits.validation, probs),
        }

    def hp_space(trial):  # the same search space as bench's service spec
        return {
            "learning_rate": trial.suggest_float("learning_rate", 2e-5, 2e-4, log=True),
            "weight_decay": trial.suggest_float("weight_decay", 0.0, 0.1),
        }

    training_args = TrainingArguments(
        output_dir=args.out + ".trainer",
        num_train_epochs=args.epochs,
        per_device_train_batch_size=16,
        eval_strategy="epoch",
        save_strategy="no",
        logging_strategy="epoch",
        report_to="none",
        disable_tqdm=True,
        seed=0,
        use_cpu=not torch.cuda.is_available(),
        bf16=args.bf16,
    )
    times = EvaluationTimes()
    trainer = WeightedTrainer(
        model_init=model_init,
        args=training_args,
        train_dataset=train,
        eval_dataset=validation,
        processing_class=tokenizer,
        compute_metrics=compute_metrics,
        callbacks=[times],
        class_weights=balanced_weights(train.labels),
    )
    search_started = time.perf_counter()
    best = trainer.hyperparameter_search(
        hp_space=hp_space,
        compute_objective=lambda m: m["eval_post_macro_f1"],
        n_trials=args.trials,
        direction="maximize",
        backend="optuna",
        sampler=optuna.samplers.TPESampler(seed=0),
    )  # the service's sampler and seed
    done = time.perf_counter()
    runtime = [entry for entry in trainer.state.log_history if "train_runtime" in entry]
    result = {
        "train_samples_per_second": runtime[-1]["train_samples_per_second"] if runtime else None,
        "best_post_macro_f1": best.objective,
        "best_params": best.hyperparameters,
        "train_tokens_per_epoch": int(sum(sum(mask) for mask in train.encodings["attention_mask"])),
        "search_seconds": done - search_started,
        "script_seconds": done - started,
        "train_examples": len(train),
        "eval_examples": len(validation),
        "evaluations": times.evaluations,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


def post_level(rows, probs) -> dict[str, float]:
    """Post x symptom matrices from per-pair probabilities, scored as the service scores them."""
    posts = {post: i for i, post in enumerate(dict.fromkeys(e.post_id for e in rows))}
    truth, scores = (
        np.zeros((len(posts), len(SYMPTOMS)), np.int64),
        np.zeros((len(posts), len(SYMPTOMS))),
    )
    for example, prob in zip(rows, probs, strict=True):
        cell = posts[example.post_id], SYMPTOMS.index(example.criterion)
        truth[cell], scores[cell] = example.label, prob
    metrics = criteria_metrics(truth, scores)
    return {"post_macro_f1": metrics["post_macro_f1"], "post_micro_f1": metrics["post_micro_f1"]}


if __name__ == "__main__":
    main()
