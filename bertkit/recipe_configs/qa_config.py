"""The `qa` recipe's config: its keys, types, defaults and help, checked by `bertkit validate` and
`bertkit run` before anything heavy is imported (this module imports no torch, transformers or datasets).
recipes/qa.py is the recipe that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from bertkit import checks, options
from bertkit.config import INLINE
from bertkit.tasks.qa import check_window_settings


@dataclass
class DataConfig:
    train: str | None = None
    """Training file: SQuAD v1.1/v2.0 JSON, or JSONL {id, question, context, answers}."""
    eval: str | None = None
    """Dev file (same formats): scored each epoch, picks the best checkpoint, tunes the null-answer threshold."""
    max_length: checks.MaxLength = 384
    """Tokens per window: [CLS] question [SEP] context [SEP]."""
    doc_stride: int = 128
    """Context tokens shared by neighbouring windows of a long context."""
    max_question_length: Annotated[int, Field(ge=1)] = 64
    """Questions longer than this many tokens are cut (and counted)."""
    strict: bool = False
    """Refuse answers that are not at their answer_start; by default they are moved within 20 characters or
    dropped (with their question if it has no other answer), and counted in the summary and metrics.json."""



@dataclass
class Config:
    model: str = options.pretrained_model()
    run: options.RunOptions = field(default_factory=lambda: options.RunOptions(output_dir="runs/qa"), metadata=INLINE)
    data: DataConfig = field(default_factory=DataConfig)
    language: Literal["auto", "en", "zh"] = "auto"
    """Answer scoring: en = SQuAD word EM/F1, zh = character EM/F1; auto = zh when the contexts are mostly CJK."""
    allow_no_answer: bool | None = None
    """Predict "no answer" (SQuAD v2); default: when the training data has unanswerable questions."""
    n_best: Annotated[int, Field(ge=1)] = 20
    """Start and end positions considered per window."""
    max_answer_length: Annotated[int, Field(ge=1)] = 30
    """Longest answer in tokens."""
    tune: options.FineTuning = field(default_factory=options.FineTuning, metadata=INLINE)
    lora: options.LoraOptions = field(default_factory=options.LoraOptions)
    train: dict = field(default_factory=lambda: options.training_defaults(epochs=2))
    """transformers.TrainingArguments, passed through (fp16/bf16 come from precision)."""

    def __post_init__(self):  # `bertkit validate` catches values that cannot work, before anything is loaded
        with checks.at_key("data.doc_stride"):
            check_window_settings(self.data.max_length, self.data.doc_stride, self.data.max_question_length)
        checks.check_recipe(self, has_eval=self.data.eval is not None, hub_data=False)
