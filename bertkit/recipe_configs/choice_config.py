"""The `choice` recipe's config: its keys, types, defaults and help, checked by `bertkit validate` and
`bertkit run` before anything heavy is imported (this module imports no torch, transformers or datasets).
recipes/choice.py is the recipe that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field

from bertkit import checks, options
from bertkit.config import INLINE


@dataclass
class DataConfig:
    train: str | None = None
    """Training file (jsonl, json, parquet) of {"context", "question", "options": [...], "label": index} rows."""
    eval: str | None = None
    """Dev file: evaluated each epoch, picks the best checkpoint."""
    max_length: checks.MaxLength = 128
    """Tokens per (context, question + option) pair, [CLS] and [SEP]s included; the longer segment is cut first."""



@dataclass
class Config:
    model: str = options.pretrained_model()
    run: options.RunOptions = field(default_factory=lambda: options.RunOptions(output_dir="runs/choice"),
                                    metadata=INLINE)
    data: DataConfig = field(default_factory=DataConfig)
    tune: options.FineTuning = field(default_factory=options.FineTuning, metadata=INLINE)
    lora: options.LoraOptions = field(default_factory=options.LoraOptions)
    train: dict = field(default_factory=lambda: options.training_defaults(batch_size=8, eval_batch_size=32))
    """transformers.TrainingArguments, passed through (fp16/bf16 come from precision)."""

    def __post_init__(self):  # `bertkit validate` catches values that cannot work, before anything is loaded
        checks.check_recipe(self, has_eval=self.data.eval is not None)
