"""The `ner` recipe's config: its keys, types, defaults and help, checked by `bertkit validate` and
`bertkit run` before anything heavy is imported (this module imports no torch, transformers or datasets).
recipes/ner.py is the recipe that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from bertkit import checks, options
from bertkit.config import INLINE


@dataclass
class DataConfig:
    train: str | None = None
    """Training file: CoNLL columns (token first, tag last) or JSONL (tokens + tags, or text + entities)."""
    eval: str | None = None
    """Dev file in the same format: scored each epoch, picks the best checkpoint."""
    format: Literal["auto", "conll", "jsonl"] = "auto"
    """File format; auto: .json/.jsonl are JSONL, anything else CoNLL columns."""
    scheme: Literal["auto", "IOB2", "IOB1", "BIOES"] = "auto"
    """Tagging scheme of the files; auto picks BIOES when E-/S- tags occur, else IOB2. IOB1 becomes IOB2."""
    repair_tags: bool = False
    """Repair tags that break the scheme (I-PER after O -> B-PER) instead of stopping; the count is reported."""
    skip_bad_examples: bool = False
    """Skip (and count) examples with bad spans or a tag count that differs from the token count."""
    split: Literal["bert", "chars"] = "bert"
    """How raw text becomes words: bert (whitespace, punctuation, each CJK character) or chars (every character)."""
    label_all_tokens: bool = False
    """Label a word's later sub-tokens too (with I- of its entity) instead of ignoring them in the loss."""
    max_length: checks.MaxLength | Literal["auto"] = 128
    """Tokens per window, [CLS] and [SEP] included; longer sentences are split into overlapping windows. auto: the
    smallest multiple of 8 covering 99 % of the training sentences (few windows, little padding), saved as a number."""
    stride: int = 32
    """Tokens that consecutive windows share."""



@dataclass
class Config:
    model: str = options.pretrained_model()
    run: options.RunOptions = field(default_factory=lambda: options.RunOptions(output_dir="runs/ner"), metadata=INLINE)
    data: DataConfig = field(default_factory=DataConfig)
    strict: bool = False
    """Score entities in seqeval's strict mode under the data's scheme (default: conlleval's lenient reading)."""
    tune: options.FineTuning = field(default_factory=options.FineTuning, metadata=INLINE)
    lora: options.LoraOptions = field(default_factory=options.LoraOptions)
    train: dict = field(default_factory=options.training_defaults)
    """transformers.TrainingArguments, passed through (fp16/bf16 come from precision)."""

    def __post_init__(self):  # `bertkit validate` catches values that cannot work, before anything is loaded
        if self.data.max_length != "auto":  # auto is checked once the training sentences decide it (load_data)
            check_stride(self.data.stride, self.data.max_length)
        checks.check_recipe(self, has_eval=self.data.eval is not None, hub_data=False)



def check_stride(stride: int, max_length: int, chosen: str = "") -> None:
    room = max_length - 2  # a window's sub-tokens between [CLS] and [SEP]
    checks.require(0 <= stride < room, "data.stride", stride,
                   f"0 or more and below the {room} tokens of a window (data.max_length - 2{chosen})",
                   f"e.g. data.stride={room // 4}")
