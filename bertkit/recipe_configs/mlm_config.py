"""The `mlm` recipe's config: its keys, types, defaults and help, checked by `bertkit validate` and
`bertkit run` before anything heavy is imported (this module imports no torch, transformers or datasets).
recipes/mlm.py is the recipe that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from bertkit import checks, options
from bertkit.config import INLINE
from bertkit.errors import BertkitError
from bertkit.shipped import DEFAULT_MODEL, scratch_size


@dataclass
class DataConfig:
    train: str | None = None
    """Corpus: .txt (paragraph per line, blank line between documents), or csv/tsv/json/jsonl/parquet/Hub dataset."""
    eval: str | None = None
    """Held-out file for perplexity (default: data.eval_fraction of the corpus's documents)."""
    eval_fraction: float = 0.05
    """Share of the corpus's documents held out for perplexity when there is no data.eval."""
    text_column: str | None = None
    """Column holding the text of a table corpus (auto-detected: text, content, document, 文本, ...)."""
    mode: Literal["line", "group"] = "group"
    """line: an example per paragraph (long ones windowed); group: all text concatenated, cut into max_length blocks."""
    max_length: checks.MaxLength = 128
    """Tokens per example, [CLS] and [SEP] included."""
    num_proc: int | None = None
    """Worker processes that tokenize the corpus (default: the usable cores, at most 8); 1 tokenizes in-process."""
    cache_dir: str | None = None
    """Where the datasets cache (Arrow files of the read and tokenized corpus) goes (default HF_DATASETS_CACHE)."""
    streaming: bool = False
    """Stream a .txt corpus larger than the disk cache (needs train.max_steps); held-out rows picked by a hash."""
    shuffle_buffer: int = 10000
    """data.streaming: examples in the seeded shuffle buffer (0 = corpus order)."""
    max_eval_examples: int | None = 2000
    """At most this many held-out examples are scored for perplexity (the first ones; null = all)."""



@dataclass
class MaskingConfig:
    probability: float = 0.15
    """Share of tokens selected for prediction."""
    mask_replace_prob: float = 0.8
    """Of the selected tokens: share replaced by [MASK]."""
    random_replace_prob: float = 0.1
    """Of the selected tokens: share replaced by a random token (the rest stay unchanged)."""
    whole_word: Literal["auto", "none", "wordpiece", "chinese"] = "auto"
    """Mask whole words: wordpiece (a word's sub-word pieces: WordPiece ##, BPE Ġ / SentencePiece ▁ word starts),
    chinese (rjieba words), none; auto = chinese for a mostly-CJK corpus, else wordpiece."""



@dataclass
class VocabConfig:
    extend: bool = False
    """Add frequent domain words that the tokenizer splits into many pieces (or maps to [UNK]) as new tokens."""
    max_new_tokens: int = 500
    """At most this many new tokens (those saving the most tokens over the corpus first)."""
    min_frequency: int = 10
    """A new token's word must occur at least this often in the training corpus."""
    min_pieces: int = 3
    """A word qualifies when the tokenizer splits it into at least this many pieces (or maps it to [UNK])."""
    size: int = 8000
    """model=scratch:*: size of the WordPiece vocabulary trained on the corpus."""
    lowercase: bool = True
    """model=scratch:*: lower-case (uncased) vocabulary."""



@dataclass
class Config:
    model: str = DEFAULT_MODEL
    """Checkpoint to continue (directory, Hub id, all-MiniLM-L6-v2), or scratch:tiny|mini|small|base."""
    run: options.RunOptions = field(default_factory=lambda: options.RunOptions(output_dir="runs/mlm"), metadata=INLINE)
    data: DataConfig = field(default_factory=DataConfig)
    masking: MaskingConfig = field(default_factory=MaskingConfig)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    nsp: bool = False
    """Also train next-sentence prediction (sentence pairs from consecutive sentences of a document)."""
    eval_seed: checks.Seed = 1234
    """Seed of the held-out masks: the same seed masks the same positions before and after training."""
    tune: options.FineTuning = field(default_factory=options.FineTuning, metadata=INLINE)
    head_warmup_steps: int = 100
    """A checkpoint without an MLM head: train the new head alone this many steps (encoder frozen) before the
    "before" perplexity, so that figure is the pretrained encoder's, not a random head's (0 = off)."""
    head_warmup_lr: float = 1.0e-3
    """Learning rate (AdamW, constant) of the head-only warm-up."""
    train: dict = field(default_factory=lambda: options.training_defaults(eval_batch_size=32))
    """transformers.TrainingArguments, passed through (fp16/bf16 come from precision)."""

    def __post_init__(self):  # `bertkit validate` catches values that cannot work, before anything is loaded
        if self.data.eval is None:
            checks.check_probability(self.data.eval_fraction, "data.eval_fraction",
                                     "e.g. data.eval_fraction=0.05, or give data.eval=<file>")
        check_masking(self.masking)
        check_data(self)
        with checks.at_key("model"):
            scratch = scratch_size(self.model)  # an unknown scratch:<size> is an error naming the sizes
        checks.check_recipe(self, has_eval=True, model=scratch is None)  # the held-out slice is always evaluated
        if self.tune.search.trials or self.tune.seeds:  # FineTuning gives mlm the keys; its trainer builds one model
            raise BertkitError("search.trials and seeds are for fine-tuning recipes (classify, ner, qa, choice, "
                               "distill) — remove them from this mlm run")



def check_masking(masking: MaskingConfig) -> None:
    checks.check_probability(masking.probability, "masking.probability", "BERT selects 0.15 of the tokens")
    for key, value in (("masking.mask_replace_prob", masking.mask_replace_prob),
                       ("masking.random_replace_prob", masking.random_replace_prob)):
        checks.require(0 <= value <= 1, key, value, "in [0, 1]", "BERT uses 0.8 [MASK] and 0.1 random")
    total = masking.mask_replace_prob + masking.random_replace_prob
    checks.require(total <= 1, "masking.random_replace_prob", masking.random_replace_prob,
                   f"at most 1 - masking.mask_replace_prob = {1 - masking.mask_replace_prob:g}",
                   "BERT uses 0.8 [MASK] and 0.1 random (the other 0.1 stay unchanged)")



def check_data(cfg: Config) -> None:
    data = cfg.data
    checks.require(data.num_proc is None or data.num_proc >= 1, "data.num_proc", data.num_proc, "at least 1",
                   "e.g. data.num_proc=4 (or leave it unset: the usable cores)")
    checks.require(data.max_eval_examples is None or data.max_eval_examples >= 1, "data.max_eval_examples",
                   data.max_eval_examples, "at least 1 (or null)", "e.g. data.max_eval_examples=2000")
    checks.require(cfg.head_warmup_steps >= 0, "head_warmup_steps", cfg.head_warmup_steps, "0 or more",
                   "0 turns it off")
    checks.require(cfg.head_warmup_lr > 0, "head_warmup_lr", cfg.head_warmup_lr, "more than 0", "e.g. 1.0e-3")
    if data.streaming:  # a stream has no length: the Trainer cannot work out the steps of an epoch
        checks.require(int(cfg.train.get("max_steps", -1) or -1) > 0, "train.max_steps", cfg.train.get("max_steps"),
                       "set (more than 0) with data.streaming=true", "e.g. train.max_steps=10000")
        checks.require(not cfg.nsp, "nsp", cfg.nsp, "false with data.streaming=true",
                       "NSP draws sentences from random documents: use data.streaming=false")
        checks.require(data.shuffle_buffer >= 0, "data.shuffle_buffer", data.shuffle_buffer, "0 or more", "e.g. 10000")
