"""The options every recipe shares, declared once: the run (`RunOptions`), the fine-tuning knobs (`FineTuning`),
with its hyperparameter search (`SearchOptions`, the `search.*` keys) and seed band (`seeds`), and LoRA
(`LoraOptions`); the columns of a classification file (`ColumnOptions`, classify and distill); the `model:` key
(`pretrained_model`) and the `train:` defaults (`training_defaults`) of a fine-tuning recipe. A field's range is
declared on it (`Annotated[int, Field(ge=1)]`, checked by pydantic when the config is loaded: bertkit/config.py);
what needs more than one value (a seed band, search ranges) or a look at the disk is in `__post_init__`.

A recipe embeds the first two inline, so users keep writing the keys at the top level (`output_dir=...`,
`llrd=0.9`, `lora.r=8`) and `bertkit validate --keys` lists them there, while code reads `cfg.run.output_dir`
and `cfg.tune.llrd`:

    @dataclass
    class Config:
        model: str = DEFAULT_MODEL
        run: RunOptions = field(default_factory=lambda: RunOptions(output_dir="runs/classify"), metadata=INLINE)
        tune: FineTuning = field(default_factory=FineTuning, metadata=INLINE)
        lora: LoraOptions = field(default_factory=LoraOptions)
        ...

Checks that need more than these values (early stopping against the dev split and `train:`) stay in
`checks.check_recipe`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from .shipped import DEFAULT_MODEL
from .checks import Seed, at_key, check_resume, check_search, check_seed_band


@dataclass
class RunOptions:
    output_dir: str
    """Where checkpoints, the final model, metrics and plots go."""
    seed: Seed = 42
    """Seed for initialisation, shuffling and dropout (and masking, in mlm)."""
    resume: bool | str = False
    """true resumes from the newest complete checkpoint of this same run in output_dir; or a checkpoint path."""
    overwrite: bool = False
    """Replace a run already in output_dir (its model, metrics and checkpoints are removed first)."""
    keep_checkpoints: bool = False
    """Keep the checkpoint-* folders (optimizer state) when the run finishes, to resume it later with more epochs;
    by default a finished run keeps only its final model and records."""
    push: str | None = None
    """Hub repo id to push the final model to (e.g. user/my-model)."""
    precision: Literal["auto", "fp32", "fp16", "bf16"] = "auto"
    """auto picks fp16/bf16 on CUDA and bf16 on CPUs with native bf16, else fp32."""

    def __post_init__(self):
        """Refuse a resume checkpoint that does not exist and a push= the Hub would refuse (said now, not after
        training)."""
        check_resume(self.resume)
        if self.push:
            from .hub import check_repo_id

            with at_key("push"):
                check_repo_id(self.push)


@dataclass
class SearchOptions:
    trials: Annotated[int, Field(ge=0)] = 0
    """Hyperparameter search: this many trials (Optuna, through Trainer.hyperparameter_search); 0 = off. Needs a dev
    split; the best trial's model becomes the run's model."""
    learning_rate: list[float] = field(default_factory=lambda: [2.0e-5, 5.0e-5])
    """[min, max] of train.learning_rate, searched on a log scale (the BERT paper's 2e-5..5e-5)."""
    batch_sizes: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1)] = field(
        default_factory=lambda: [16, 32])
    """train.per_device_train_batch_size values to choose from."""
    epochs: list[int] = field(default_factory=lambda: [2, 4])
    """[min, max] of train.num_train_epochs (whole epochs)."""
    warmup: list[float] = field(default_factory=lambda: [0.0, 0.1])
    """[min, max] of train.warmup_steps as a share of the training steps."""
    llrd: list[float] = field(default_factory=lambda: [0.8, 1.0])
    """[min, max] of the layer-wise learning-rate decay (llrd); [1.0, 1.0] keeps it off."""
    pruning: bool = True
    """Stop a trial early when, at an evaluation, it is below the median of the finished trials (Optuna's
    MedianPruner, from the first evaluation on)."""


@dataclass
class FineTuning:
    llrd: Annotated[float, Field(gt=0, le=1)] = 1.0
    """Layer-wise learning-rate decay factor (1.0 = off; 0.8-0.95 typical)."""
    head_lr: Annotated[float, Field(gt=0)] | None = None
    """Learning rate of the new task head (default: train.learning_rate)."""
    early_stopping_patience: Annotated[int, Field(ge=1)] | None = None
    """Stop after this many evaluations without improvement (needs a dev split)."""
    search: SearchOptions = field(default_factory=SearchOptions)
    seeds: list[Seed] | None = None
    """Train once per seed (e.g. [42,43,44]): mean ± sd of each dev metric, and the best seed's model kept."""

    def __post_init__(self):
        """Refuse search ranges and a seed band that cannot work (the dev split is checked by the recipe)."""
        check_search(self.search)
        check_seed_band(self.seeds, searching=self.search.trials > 0)


@dataclass
class LoraOptions:
    enabled: bool = False
    """Train LoRA adapters (peft) instead of all weights."""
    r: Annotated[int, Field(ge=1)] = 8
    """LoRA rank."""
    alpha: Annotated[int, Field(gt=0)] = 16
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: Annotated[float, Field(ge=0, lt=1)] = 0.1
    """Dropout on the LoRA branch."""
    target_modules: Annotated[list[str], Field(min_length=1)] = field(default_factory=lambda: ["query", "value"])
    """Linear layers that get adapters."""
    merge: bool = True
    """Save the merged model (loads anywhere); false saves the adapter alone."""


@dataclass
class ColumnOptions:
    text_column: str | None = None
    """Column holding the text (auto-detected: text, sentence, premise, 文本, ...)."""
    text_pair_column: str | None = None
    """Column holding the second segment of a sentence pair (auto-detected: text_pair, sentence2, hypothesis, ...)."""
    label_column: str | None = None
    """Column holding the label (auto-detected: label, labels, score, 标签, ...)."""


def pretrained_model():
    """The `model:` field of a recipe that fine-tunes a pretrained BERT (its help line is the field's metadata)."""
    return field(default=DEFAULT_MODEL, metadata={
        "help": "Model to fine-tune: a local directory, a Hub id, or all-MiniLM-L6-v2 (embedded)."})


def training_defaults(learning_rate: float = 5e-5, epochs: int = 3, batch_size: int = 16,
                      eval_batch_size: int = 64) -> dict:
    """A recipe's `train:` defaults (TrainingArguments keys): the same keys everywhere, the recipe's numbers."""
    return {"learning_rate": learning_rate, "num_train_epochs": epochs, "per_device_train_batch_size": batch_size,
            "per_device_eval_batch_size": eval_batch_size, "warmup_steps": 0.1, "weight_decay": 0.01}


__all__ = ["RunOptions", "SearchOptions", "FineTuning", "LoraOptions", "ColumnOptions", "pretrained_model",
           "training_defaults"]
