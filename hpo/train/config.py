"""The plain configuration of one fine-tuning run. It knows nothing of Optuna or study files:
the objective turns a trial into one of these.

A pydantic dataclass: each range is a constraint on its field, the rules between fields are
the one validator at the end, and a bad value fails when the config is built (the study file
is checked by building one per range end, naming the key). ``dataclasses.replace`` checks the
new config again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import fields
from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator
from pydantic.dataclasses import dataclass

from hpo.models.settings import Activation, Dropout, HeadConfig, HiddenLayers, LoraSettings, Pooling
from hpo.validation import problem
from hpo.vocabulary import (
    LONG_TEXT,
    OWN_READINGS,
    TRAITS,
    CriteriaFormulation,
    EvidenceScope,
    Formulation,
    FormulationTraits,
    LongText,
    Metric,
    PostPooling,
    Task,
    Threshold,
    TrainOn,
    formulation_for,
)

# micro_batch_tokens: auto on CPU (~0.35 GB of activations for MiniLM in float32)
CPU_MICRO_BATCH_TOKENS = 1024
INFERENCE_TOKENS_PER_TRAINING_TOKEN = 4  # no graph kept: a pass without one may hold 4x the tokens
CPU_INFERENCE_TOKENS = CPU_MICRO_BATCH_TOKENS * INFERENCE_TOKENS_PER_TRAINING_TOKEN
Share = Annotated[float, Field(ge=0, lt=1)]  # a fraction of something, never all of it
# Training's other numbers are finite (inf or 1e308 is a typo that trains a NaN model) and within
# what any run uses: AdamW moves a weight by about the learning rate per step, so 1 already moves
# it by its own size; weight decay shrinks weights by lr * decay per step (0.01-0.1 is usual);
# the sentence loss is weighed against the post loss's 1 and focal loss's gamma is 0-5 in use.
LearningRate = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Weight = Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)]
# where a run's outputs go, not what it trains: two configs that differ only here train one model
WHERE_ONLY = frozenset({"checkpoint_dir", "cache_dir"})


# Settings only some formulations read (whole_post pools sentence scores; the others pool
# tokens): anywhere else a spec's value for them changes nothing
READ_BY: dict[str, tuple[str, ...]] = {
    setting: tuple(name for name, traits in TRAITS.items() if setting in traits.reads)
    for setting in sorted(frozenset().union(*(traits.reads for traits in TRAITS.values())))
}


@dataclass(frozen=True)
class TrainConfig:
    task: Task
    encoder: str  # hub name or local path
    data_dir: str

    # classification head and encoder; head and LoRA defaults are HeadConfig's and LoraSettings'
    pooling: Pooling = HeadConfig.pooling
    head_layers: HiddenLayers = HeadConfig.hidden_layers
    head_hidden_size: PositiveInt = HeadConfig.hidden_size
    head_activation: Activation = HeadConfig.activation
    head_dropout: Dropout = HeadConfig.dropout
    # hidden and attention dropout; None keeps the checkpoint's
    encoder_dropout: Dropout | None = None
    # attention-probability dropout alone (beats encoder_dropout's)
    attention_dropout: Dropout | None = None
    # lora: train LoRA adapters (peft), base encoder frozen
    adapter: Literal["full", "lora"] = "full"
    lora_r: PositiveInt = LoraSettings.r
    lora_alpha: PositiveInt = LoraSettings.alpha
    lora_dropout: Dropout = LoraSettings.dropout
    # comma-separated names or "all-linear"; None: peft's default
    lora_target_modules: str | None = LoraSettings.target_modules

    # optimisation
    learning_rate: LearningRate = 3e-5
    head_learning_rate: LearningRate | None = None  # None: same as learning_rate
    # encoder layer i of L trains at learning_rate * decay^(L - i); 1: off
    layerwise_lr_decay: Annotated[float, Field(gt=0, le=1)] = 1.0
    freeze_layers: NonNegativeInt = (
        0  # > 0: embeddings and the bottom n encoder layers are not trained
    )
    weight_decay: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.01
    batch_size: PositiveInt = 16  # effective batch per optimizer step
    # sequences per forward pass (a post's chunks count); None: batch_size;
    # halves on out-of-memory. Gradient accumulation: same gradient as one full batch
    micro_batch_size: PositiveInt | None = None
    # tokens per forward pass at most, which bounds a step's activations; auto: 1024 on CPU
    # (as fast per token as larger passes there), none on GPUs (whose out-of-memory halves the
    # micro-batch); None: no bound
    micro_batch_tokens: PositiveInt | Literal["auto"] | None = "auto"
    epochs: PositiveInt = 3
    warmup_ratio: Share = 0.06
    scheduler: Literal["linear", "cosine", "constant"] = "linear"
    # 0 or None: no clipping
    max_grad_norm: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = 1.0
    class_weighting: Literal["none", "balanced", "sqrt"] = "none"
    label_smoothing: Annotated[float, Field(ge=0, lt=0.5)] = (
        0.0  # targets pulled to eps/2 and 1 - eps/2
    )
    # > 0: focal loss, down-weighting examples the model already gets right
    focal_gamma: Weight = 0.0
    early_stopping_patience: int | None = None  # epochs without improvement
    max_length: PositiveInt = 256
    # auto: bf16 where the hardware has it
    mixed_precision: Literal["auto", "bf16", "fp16", "no"] = "auto"
    activation_checkpointing: bool = False

    # the task as the model sees it
    # criteria: 9 (criterion, post) pairs, one post, or one post read sentence by sentence
    criteria_formulation: CriteriaFormulation = "pairs"
    # texts longer than max_length; whole_post always reads every sentence ("sentences")
    long_text: LongText = "truncate"
    # whole_post: how a post's sentence scores pool into its score per symptom
    post_pooling: PostPooling = "max"
    # whole_post: weight of the loss that teaches which sentences state a symptom, from the
    # training posts' evidence sentences (0: off)
    evidence_loss_weight: Weight = 0.0
    # whole_post: weight of the loss that scores a training post's hard negatives low: the
    # sentences a clinician marked as touching a symptom without showing it (status 0)
    hard_negative_weight: Weight = 0.0
    # criteria each post is paired with
    evidence_scope: EvidenceScope = "positive_criteria"
    # training: unannotated sentences per annotated one; None: all
    evidence_negative_ratio: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    # training texts only, fixed per seed
    augmentation: Literal["none", "word_dropout", "word_swap"] = "none"
    # word_dropout: share of words left out; word_swap: swaps per word
    augmentation_rate: Share = 0.1
    # decide at 0.5, or at per-symptom thresholds tuned on validation
    threshold: Threshold = "fixed"

    # data and evaluation
    objective_metric: Metric = "macro_f1"
    eval_batch_size: PositiveInt = 64
    split_seed: int = 0
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    # < 1: train on this share of the training posts (stratified, fixed by split_seed) with the
    # whole schedule: a search's low-fidelity run; validation and test stay whole
    train_share: Annotated[float, Field(gt=0, le=1)] = 1.0
    descriptions_path: str | None = None
    cache_dir: str | None = None  # on-disk tokenization cache shared by workers
    # hpo finalize --refit train+val only: train on both splits and keep the last epoch (validation
    # has been trained on, so it can no longer choose one); never a search setting
    train_on: TrainOn = "train"
    # hpo finalize --cv K only: (K, i) trains on the other K-1 folds of the train + validation
    # posts and validates on fold i; the test split is untouched. Never a search setting
    cv_fold: tuple[int, int] | None = None

    # runtime
    seed: int = 0  # python, numpy and torch, as transformers.set_seed seeds them
    # deterministic kernels, as transformers.enable_full_determinism sets them: slower
    deterministic: bool = False
    device: str = "auto"  # auto: cuda when available
    gpus_per_trial: PositiveInt = 1  # > 1: one trial on that many GPUs through DataParallel
    # the folder the best checkpoint is saved into; None: not saved
    checkpoint_dir: str | None = None

    @model_validator(mode="after")
    def _rules_across_fields(self) -> TrainConfig:
        own = self.traits.reading
        if own and self.long_text == "truncate":  # the default: the formulation's own reading
            object.__setattr__(self, "long_text", own)
        if own and self.long_text != own:
            others = ", ".join(
                n for n, t in TRAITS.items() if t.task == "criteria" and not t.reading
            )
            raise problem(
                f"{self.formulation} reads every sentence, so {self.long_text} does not apply; "
                f"leave long_text out (search it with when: {{criteria_formulation: [{others}]}})",
                at="long_text",
            )
        if not self.traits.can_read(self.long_text):
            owner = next(n for n, t in TRAITS.items() if t.reading == self.long_text)
            *others, last = (r for r in LONG_TEXT if r not in OWN_READINGS)
            raise problem(
                f"{self.long_text} is how criteria_formulation {owner} reads a post; choose "
                f"that formulation, or {', '.join(others)} or {last}",
                at="long_text",
            )
        if self.micro_batch_size is not None and self.micro_batch_size > self.batch_size:
            raise problem(
                f"must be at most batch_size ({self.batch_size}), got {self.micro_batch_size}; "
                "lower it or leave it out",
                at="micro_batch_size",
            )
        if self.cv_fold is not None and not 0 <= self.cv_fold[1] < self.cv_fold[0]:
            raise problem(f"must be (K, i) with 0 <= i < K, got {self.cv_fold}", at="cv_fold")
        if self.cv_fold is not None and self.train_on != "train":
            raise problem("chooses the training posts itself; keep train_on: train", at="cv_fold")
        return self

    def ignored(self, given: Iterable[str]) -> list[str]:
        """Of the settings ``given`` (a spec's fixed train keys), those this run's formulation
        never reads: a spec that sets them says nothing wrong, only nothing (issue #55)."""
        return [n for n in given if n in READ_BY and n not in self.traits.reads]

    @property
    def traits(self) -> FormulationTraits:
        """What every layer may know of the formulation (hpo.vocabulary.TRAITS)."""
        return TRAITS[self.formulation]

    @property
    def formulation(self) -> Formulation:
        """How the task is put to the model, one name from the data to the saved model:
        pairs or multilabel (criteria), evidence."""
        return formulation_for(self.task, self.criteria_formulation)

    def token_budget(self, device_type: str) -> int | None:
        """Tokens per training forward pass at most (``micro_batch_tokens`` resolved for the
        device)."""
        if self.micro_batch_tokens == "auto":
            return CPU_MICRO_BATCH_TOKENS if device_type == "cpu" else None
        return self.micro_batch_tokens

    def inference_token_budget(self, device_type: str) -> int | None:
        """Tokens per pass without a graph (evaluation, picking chunks, test scoring)."""
        budget = self.token_budget(device_type)
        return budget and budget * INFERENCE_TOKENS_PER_TRAINING_TOKEN

    def head_config(self, num_labels: int = 1) -> HeadConfig:
        return HeadConfig(
            pooling=self.pooling,
            hidden_layers=self.head_layers,
            hidden_size=self.head_hidden_size,
            activation=self.head_activation,
            dropout=self.head_dropout,
            num_labels=num_labels,
            post_pooling=self.post_pooling if self.traits.scores_sentences else None,
        )

    def lora_settings(self) -> LoraSettings | None:
        if self.adapter != "lora":
            return None
        return LoraSettings(
            r=self.lora_r,
            alpha=self.lora_alpha,
            dropout=self.lora_dropout,
            target_modules=self.lora_target_modules,
        )

    def training_digest(self) -> str:
        """A digest of every setting that decides the trained model (all but WHERE_ONLY): a
        trial records it, so that finalize can tell whether the trial's kept checkpoint is the
        model a retraining of it would give."""
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in WHERE_ONLY}
        text = json.dumps(settings, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))
