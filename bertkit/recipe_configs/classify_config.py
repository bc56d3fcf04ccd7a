"""The `classify` recipe's config: its keys, types, defaults and help, checked by `bertkit validate` and
`bertkit run` before anything heavy is imported (this module imports no torch, transformers or datasets).
recipes/classify.py is the recipe that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from bertkit import checks, options
from bertkit.config import INLINE
from bertkit.errors import BertkitError
from bertkit.tasks.long_documents import LongDocConfig, uses_attention


@dataclass
class DataConfig:
    train: str | None = None
    """Training file (csv, tsv, json, jsonl, parquet, txt) or a Hub dataset name."""
    eval: str | None = None
    """Dev file: evaluated each epoch, picks the best checkpoint, tunes the multi-label threshold."""
    columns: options.ColumnOptions = field(default_factory=options.ColumnOptions, metadata=INLINE)
    label_kind: Literal["auto", "single", "multi", "regression"] = "auto"
    """single-label, multi-label (list or delimited labels) or regression; auto decides from the training labels."""
    label_delimiter: Annotated[str, Field(min_length=1)] = ";"
    """Separator of several labels in one string cell (multi-label)."""
    max_length: checks.MaxLength | Literal["auto"] = 128
    """Tokens per example (per window), [CLS] and [SEP] included; longer texts follow long_doc.strategy. auto: the
    smallest multiple of 8 covering 99 % of the training texts, within the model's positions."""



@dataclass
class Config:
    model: str = options.pretrained_model()
    run: options.RunOptions = field(default_factory=lambda: options.RunOptions(output_dir="runs/classify"),
                                    metadata=INLINE)
    data: DataConfig = field(default_factory=DataConfig)
    long_doc: LongDocConfig = field(default_factory=LongDocConfig)
    """Texts longer than data.max_length: head / tail / head_tail truncation or chunk windows (saved for predict)."""
    pooling: Literal["cls", "mean"] = "cls"
    """Sentence vector: BERT's [CLS] pooler, or the mean of the token vectors."""
    tune: options.FineTuning = field(default_factory=options.FineTuning, metadata=INLINE)
    lora: options.LoraOptions = field(default_factory=options.LoraOptions)
    class_weights: Literal["auto"] | dict[str, Annotated[float, Field(gt=0)]] | None = None
    """Loss weight per label: auto (inverse frequency; multi-label: BCE pos_weight) or label=weight (others 1)."""
    calibrate: bool = True
    """With a dev split, fit a temperature on it so that probabilities match accuracy (saved; predict applies it)."""
    abstain_below: Annotated[float, Field(gt=0, lt=1)] | None = None
    """predict / serve give no label to rows less confident than this (marked abstained); saved with the model."""
    train: dict = field(default_factory=options.training_defaults)
    """transformers.TrainingArguments, passed through (fp16/bf16 come from precision)."""

    def __post_init__(self):  # `bertkit validate` catches values that cannot work, before anything is loaded
        if self.data.max_length != "auto":  # auto is checked once the training texts decide it (load_data)
            self.long_doc.check(self.data.max_length)
        checks.check_recipe(self, has_eval=self.data.eval is not None)
        if uses_attention(self.long_doc) and self.lora.enabled and not self.lora.merge:
            # an adapter folder records no architecture: stock peft would rebuild a per-window sequence classifier
            raise BertkitError("long_doc.aggregate=attention with lora.merge=false: stock peft would load the adapter "
                               "as a per-window sequence classifier without the window attention — use "
                               "lora.merge=true (the merged model is the document model)")
        if self.pooling == "mean" and self.lora.enabled and not self.lora.merge:
            # peft's AutoPeftModelForSequenceClassification rebuilds the base from its own config ([CLS] pooler),
            # not the task config beside the adapter: it would load such an adapter and silently predict otherwise
            raise BertkitError("pooling=mean with lora.merge=false: stock peft would load the adapter onto a [CLS]-"
                               "pooling BERT and predict differently — use lora.merge=true (the merged model records "
                               "mean pooling) or pooling=cls")
