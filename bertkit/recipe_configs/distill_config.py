"""The `distill` recipe's config: its keys, types, defaults and help, checked by `bertkit validate` and
`bertkit run` before anything heavy is imported (this module imports no torch, transformers or datasets).
recipes/distill.py is the recipe that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field

from bertkit import checks, options
from bertkit.config import INLINE


@dataclass
class DataConfig:
    train: str | None = None
    """Labelled training file (csv, tsv, json, jsonl, parquet, txt), labels spelled as the teacher's label map."""
    eval: str | None = None
    """Dev file: evaluated each epoch, picks the best checkpoint; the teacher is scored on it too."""
    unlabelled: str | None = None
    """Extra transfer text without labels (a .txt file, one text per line, or a table with a text column)."""
    columns: options.ColumnOptions = field(default_factory=options.ColumnOptions, metadata=INLINE)
    max_length: checks.MaxLength = 128
    """Tokens per example, [CLS] and [SEP] included; longer texts are truncated."""



@dataclass
class StudentConfig:
    num_layers: Annotated[int, Field(ge=1)] | None = None
    """Keep this many of the teacher's layers, evenly spaced (null: half of them; at most the teacher's)."""
    layers: list[int] | None = None
    """Keep exactly these teacher layers (0-based), e.g. [0, 2, 4]."""
    model: str | None = None
    """Or start from another checkpoint (same vocabulary as the teacher) instead of the teacher's layers."""



@dataclass
class Config:
    teacher: str | None = None
    """The fine-tuned classifier to learn from: a run directory or a stock BERT classifier directory."""
    run: options.RunOptions = field(default_factory=lambda: options.RunOptions(output_dir="runs/distill"),
                                    metadata=INLINE)
    data: DataConfig = field(default_factory=DataConfig)
    student: StudentConfig = field(default_factory=StudentConfig)
    temperature: Annotated[float, Field(gt=0)] = 2.0
    """Softmax temperature of both models' logits in the soft-target term."""
    alpha: Annotated[float, Field(ge=0, le=1)] = 0.5
    """Weight of the soft-target term (1 - alpha: the hard labels)."""
    hidden_weight: Annotated[float, Field(ge=0)] = 0.0
    """Weight of the hidden-state MSE between mapped layers (TinyBERT style; 0 = off)."""
    tune: options.FineTuning = field(default_factory=options.FineTuning, metadata=INLINE)
    train: dict = field(default_factory=lambda: options.training_defaults(learning_rate=1e-4, batch_size=32))
    """transformers.TrainingArguments, passed through (fp16/bf16 come from precision)."""

    def __post_init__(self):  # the teacher's path is checked when the run starts: it may be a run still to come
        checks.check_recipe(self, has_eval=self.data.eval is not None, model=False)
        checks.check_data_file(self.data.unlabelled, "data.unlabelled")
        if self.student.model:  # a pretrained checkpoint, there before the run: checked now (another architecture...)
            checks.check_model(self.student.model, "student.model")
        checks.require(bool(self.teacher), "teacher", self.teacher, "a fine-tuned classifier directory",
                       "set teacher=<a classify run's output_dir>")
