"""The plain configuration of one fine-tuning run. It knows nothing of Optuna or study files:
the objective turns a trial into one of these."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from hpo.models.settings import HeadConfig, LoraSettings

# micro_batch_tokens: auto on CPU (~0.35 GB of activations for MiniLM in float32)
CPU_MICRO_BATCH_TOKENS = 1024
INFERENCE_TOKENS_PER_TRAINING_TOKEN = 4  # no graph kept: a pass without one may hold 4x the tokens
CPU_INFERENCE_TOKENS = CPU_MICRO_BATCH_TOKENS * INFERENCE_TOKENS_PER_TRAINING_TOKEN


@dataclass(frozen=True)
class TrainConfig:
    task: Literal["criteria", "evidence"]
    encoder: str  # hub name or local path
    data_dir: str

    # classification head and encoder; head and LoRA defaults are HeadConfig's and LoraSettings'
    pooling: Literal["cls", "mean"] = HeadConfig.pooling
    head_layers: int = HeadConfig.hidden_layers
    head_hidden_size: int = HeadConfig.hidden_size
    head_activation: str = HeadConfig.activation
    head_dropout: float = HeadConfig.dropout
    # hidden and attention dropout; None keeps the checkpoint's
    encoder_dropout: float | None = None
    # attention-probability dropout alone (beats encoder_dropout's)
    attention_dropout: float | None = None
    # lora: train LoRA adapters (peft), base encoder frozen
    adapter: Literal["full", "lora"] = "full"
    lora_r: int = LoraSettings.r
    lora_alpha: int = LoraSettings.alpha
    lora_dropout: float = LoraSettings.dropout
    # comma-separated names or "all-linear"; None: peft's default
    lora_target_modules: str | None = LoraSettings.target_modules

    # optimisation
    learning_rate: float = 3e-5
    head_learning_rate: float | None = None  # None: same as learning_rate
    # encoder layer i of L trains at learning_rate * decay^(L - i); 1: off
    layerwise_lr_decay: float = 1.0
    freeze_layers: int = 0  # > 0: embeddings and the bottom n encoder layers are not trained
    weight_decay: float = 0.01
    batch_size: int = 16  # effective batch per optimizer step
    # sequences per forward pass (a post's chunks count); None: batch_size;
    # halves on out-of-memory. Gradient accumulation: same gradient as one full batch
    micro_batch_size: int | None = None
    # tokens per forward pass at most, which bounds a step's activations; auto: 1024 on CPU
    # (as fast per token as larger passes there), none on GPUs (whose out-of-memory halves the
    # micro-batch); None: no bound
    micro_batch_tokens: int | Literal["auto"] | None = "auto"
    epochs: int = 3
    warmup_ratio: float = 0.06
    scheduler: Literal["linear", "cosine", "constant"] = "linear"
    max_grad_norm: float | None = 1.0
    class_weighting: Literal["none", "balanced", "sqrt"] = "none"
    label_smoothing: float = 0.0  # targets pulled to eps/2 and 1 - eps/2
    # > 0: focal loss, down-weighting examples the model already gets right
    focal_gamma: float = 0.0
    early_stopping_patience: int | None = None  # epochs without improvement
    max_length: int = 256
    # auto: bf16 where the hardware has it
    mixed_precision: Literal["auto", "bf16", "fp16", "no"] = "auto"
    activation_checkpointing: bool = False

    # the task as the model sees it
    # criteria: 9 (criterion, post) pairs, or one post
    criteria_formulation: Literal["pairs", "multilabel"] = "pairs"
    # texts longer than max_length
    long_text: Literal["truncate", "head_tail", "chunks"] = "truncate"
    # criteria each post is paired with
    evidence_scope: Literal["positive_criteria", "all_criteria"] = "positive_criteria"
    # training: unannotated sentences per annotated one; None: all
    evidence_negative_ratio: float | None = None
    # training texts only, fixed per seed
    augmentation: Literal["none", "word_dropout", "word_swap"] = "none"
    # word_dropout: share of words left out; word_swap: swaps per word
    augmentation_rate: float = 0.1
    # decide at 0.5, or at per-symptom thresholds tuned on validation
    threshold: Literal["fixed", "tuned"] = "fixed"

    # data and evaluation
    objective_metric: str = "macro_f1"
    eval_batch_size: int = 64
    split_seed: int = 0
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    descriptions_path: str | None = None
    cache_dir: str | None = None  # on-disk tokenization cache shared by workers
    # hpo finalize --refit train+val only: train on both splits and keep the last epoch (validation
    # has been trained on, so it can no longer choose one); never a search setting
    train_on: Literal["train", "train+validation"] = "train"
    # hpo finalize --cv K only: (K, i) trains on the other K-1 folds of the train + validation
    # posts and validates on fold i; the test split is untouched. Never a search setting
    cv_fold: tuple[int, int] | None = None

    # runtime
    seed: int = 0  # python, numpy and torch, as transformers.set_seed seeds them
    # deterministic kernels, as transformers.enable_full_determinism sets them: slower
    deterministic: bool = False
    device: str = "auto"  # auto: cuda when available
    gpus_per_trial: int = 1  # > 1: one trial on that many GPUs through DataParallel
    # the folder the best checkpoint is saved into; None: not saved
    checkpoint_dir: str | None = None

    def __post_init__(self):
        if self.cv_fold is not None and not 0 <= self.cv_fold[1] < self.cv_fold[0]:
            raise ValueError(f"cv_fold must be (K, i) with 0 <= i < K, got {self.cv_fold}")
        if self.cv_fold is not None and self.train_on != "train":
            raise ValueError("cv_fold chooses the training posts itself; keep train_on: train")
        for name in ("batch_size", "epochs", "max_length", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.micro_batch_size is not None and not 1 <= self.micro_batch_size <= self.batch_size:
            raise ValueError(
                f"micro_batch_size must be in 1..batch_size ({self.batch_size}), "
                f"got {self.micro_batch_size}"
            )
        if isinstance(self.micro_batch_tokens, int) and self.micro_batch_tokens < 1:
            raise ValueError(
                "micro_batch_tokens must be >= 1 (or auto, or null for no bound), "
                f"got {self.micro_batch_tokens}"
            )
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.lora_r < 1 or self.lora_alpha < 1 or not 0 <= self.lora_dropout < 1:
            raise ValueError("lora_r and lora_alpha must be >= 1 and lora_dropout in [0, 1)")
        if not 0 <= self.label_smoothing < 0.5 or self.focal_gamma < 0:
            raise ValueError(
                f"label_smoothing must be in [0, 0.5) and focal_gamma >= 0, got "
                f"{self.label_smoothing} and {self.focal_gamma}"
            )
        if not 0 <= self.augmentation_rate < 1:
            raise ValueError(f"augmentation_rate must be in [0, 1), got {self.augmentation_rate}")
        if not 0 < self.layerwise_lr_decay <= 1 or self.freeze_layers < 0:
            raise ValueError(
                f"layerwise_lr_decay must be in (0, 1] and freeze_layers >= 0, got "
                f"{self.layerwise_lr_decay} and {self.freeze_layers}"
            )
        for name in ("encoder_dropout", "attention_dropout"):
            if getattr(self, name) is not None and not 0 <= getattr(self, name) < 1:
                raise ValueError(
                    f"{name} must be in [0, 1) (or null for the checkpoint's), "
                    f"got {getattr(self, name)}"
                )
        if self.evidence_negative_ratio is not None and self.evidence_negative_ratio < 0:
            raise ValueError(
                "evidence_negative_ratio must be >= 0 (or null for all), "
                f"got {self.evidence_negative_ratio}"
            )
        if self.gpus_per_trial < 1:
            raise ValueError(f"gpus_per_trial must be >= 1, got {self.gpus_per_trial}")
        self.head_config()  # validates the head settings

    @property
    def formulation(self) -> str:
        """How the task is put to the model, one name from the data to the saved model:
        pairs or multilabel (criteria), evidence."""
        return self.criteria_formulation if self.task == "criteria" else "evidence"

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

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))
