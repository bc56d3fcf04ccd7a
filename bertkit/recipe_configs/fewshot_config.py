"""The `fewshot` recipe's config: its keys, types, defaults and help, checked by `bertkit validate` and
`bertkit run` before anything heavy is imported (this module imports no torch, transformers or setfit).
recipes/fewshot.py is the recipe that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from bertkit import checks, options
from bertkit.config import INLINE
from bertkit.errors import ConfigValueError


@dataclass
class DataConfig:
    train: str | None = None
    """Training file (csv, tsv, json, jsonl, parquet, txt): a few labelled texts per class (8-64 is where this
    recipe beats classify)."""
    eval: str | None = None
    """Dev file: measured after training, fits the calibration temperature."""
    columns: options.ColumnOptions = field(default_factory=options.ColumnOptions, metadata=INLINE)
    label_kind: Literal["auto", "single", "multi"] = "auto"
    """single-label or multi-label (list or delimited labels; one-vs-rest heads); auto decides from the labels."""
    label_delimiter: Annotated[str, Field(min_length=1)] = ";"
    """Separator of several labels in one string cell (multi-label)."""
    max_length: checks.MaxLength | None = None
    """Tokens per text, [CLS] and [SEP] included; null: the model's own (MiniLM: 256)."""


@dataclass
class Config:
    model: str = options.pretrained_model()
    run: options.RunOptions = field(default_factory=lambda: options.RunOptions(output_dir="runs/fewshot"),
                                    metadata=INLINE)
    data: DataConfig = field(default_factory=DataConfig)
    epochs: Annotated[int, Field(ge=1)] = 1
    """Passes over the contrastive pairs (SetFit's num_epochs)."""
    num_iterations: Annotated[int, Field(ge=1)] | None = 20
    """Pairs drawn per training text and epoch, half similar, half not (SetFit's num_iterations, the SetFit paper's
    20); null: setfit's own default, every pair its oversampling gives (on SST-2 with 8 per class, 3 draws: 0.616
    against 0.644 for 20)."""
    batch_size: Annotated[int, Field(ge=2)] = 16
    """Pairs per step of the contrastive fine-tuning."""
    learning_rate: Annotated[float, Field(gt=0)] = 2e-5
    """The sentence-embedding body's learning rate (SetFit's body_learning_rate)."""
    seeds: list[checks.Seed] | None = None
    """Train once per seed and keep the model with the best dev score, the band (mean ± sd of every dev metric) in
    metrics.json: with a few labels, the pairs drawn and the head's start move the score by points. Needs data.eval."""
    calibrate: bool = True
    """With a dev split, fit a temperature on it so that probabilities match accuracy (saved; predict applies it)."""
    abstain_below: Annotated[float, Field(gt=0, lt=1)] | None = None
    """predict / serve give no label to rows less confident than this (marked abstained); saved with the model."""

    def __post_init__(self):  # `bertkit validate` catches values that cannot work, before anything is loaded
        if self.run.resume:
            raise ConfigValueError("resume", "config key 'resume': a few-shot run keeps no checkpoints to resume "
                                   "from (it takes a minute or two) — run it again with overwrite=true")
        if self.run.precision in ("fp16", "bf16"):
            raise ConfigValueError("precision", f"config key 'precision' is {self.run.precision}: the few-shot recipe "
                                   "trains in fp32 (setfit) — use precision=auto or fp32")
        checks.check_seed_band(self.seeds, searching=False)
        if self.seeds and not self.data.eval:
            raise ConfigValueError("seeds", "config key 'seeds': a seed band keeps the seed with the best dev score, "
                                   "and there is no dev split — set data.eval=dev.csv, or leave seeds out")
        checks.check_model(self.model)
        checks.check_data_file(self.data.train, "data.train", hub=False)
        checks.check_data_file(self.data.eval, "data.eval", hub=False)
