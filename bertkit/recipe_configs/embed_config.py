"""The `embed` recipe's config: its keys, types, defaults and help, checked by `bertkit validate` and
`bertkit run` before anything heavy is imported (this module imports no torch, transformers or datasets).
recipes/embed.py is the recipe that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from bertkit import checks, options
from bertkit.config import INLINE
from bertkit.errors import BertkitError, ConfigValueError
from bertkit.tasks.retrieval_files import RetrievalColumns


@dataclass
class DataConfig:
    train: str | None = None
    """Training file: pairs, triplets / groups (FlagEmbedding JSONL), or scored pairs (csv, tsv, json, jsonl)."""
    eval: str | None = None
    """Dev file of the same kind: evaluated before and after training, and each epoch."""
    corpus: str | None = None
    """More passages for the dev ranking besides the dev positives (.txt one per line, or a table with text)."""
    columns: RetrievalColumns = field(default_factory=RetrievalColumns, metadata=INLINE)
    max_length: checks.MaxLength | None = None
    """Tokens per text, [CLS] and [SEP] included; null: the model's own (MiniLM: 256), else 256."""



@dataclass
class Config:
    model: str = options.pretrained_model()
    run: options.RunOptions = field(default_factory=lambda: options.RunOptions(output_dir="runs/embed"),
                                    metadata=INLINE)
    data: DataConfig = field(default_factory=DataConfig)
    loss: Literal["mnrl", "cached_mnrl", "cosent"] = "mnrl"
    """mnrl: in-batch negatives (MultipleNegativesRankingLoss); cached_mnrl: the same with GradCache for large
    batches; cosent: scored pairs (CoSENTLoss)."""
    scale: Annotated[float, Field(gt=0)] = 20.0
    """Similarity scale of the loss = 1 / temperature (20 = temperature 0.05)."""
    mini_batch_size: Annotated[int, Field(ge=1)] = 32
    """cached_mnrl: texts per forward pass; memory follows this, not the batch size."""
    matryoshka_dims: list[Annotated[int, Field(ge=1)]] | None = None
    """Also train truncated vectors of these sizes, largest first (MatryoshkaLoss), e.g. [384, 256, 128, 64];
    null: full-size vectors only."""
    pooling: Literal["auto", "cls", "mean"] = "auto"
    """auto: the model's own sentence-transformers pooling; a plain checkpoint has none: mean is assumed (said)."""
    normalize: bool | None = None
    """Unit-length vectors; null: as the model's own files say (a plain checkpoint: true)."""
    query_prefix: str = ""
    """Put before every query (e.g. "query: " for e5, bge's instruction); saved as the model's "query" prompt."""
    passage_prefix: str = ""
    """Put before every passage (e.g. "passage: "); saved as the model's "document" prompt."""
    retriever: Literal["auto", "dense", "bm25", "hybrid"] = "auto"
    """The first stage `bertkit predict --corpus` and `evaluate` rank with (saved as retriever.json): auto: the best
    on the dev set (pairs) of BM25, the model and their fusion, its weight tuned there; a name: that one."""
    fusion: Literal["convex", "rrf"] = "convex"
    """hybrid: convex (min-max normalised scores, the weight tuned on dev) or rrf (reciprocal-rank fusion)."""
    bm25_chinese: Literal["bigram", "char", "jieba"] = "bigram"
    """BM25's terms for Chinese text: characters and their bigrams (best on CMRC 2018), characters, rjieba words."""
    batch_sampler: Literal["auto", "no_duplicates", "batch_sampler"] = "auto"
    """auto: no_duplicates for in-batch-negative losses (a duplicate text in a batch is a false negative)."""
    tune: options.FineTuning = field(default_factory=options.FineTuning, metadata=INLINE)
    lora: options.LoraOptions = field(default_factory=options.LoraOptions)
    train: dict = field(default_factory=lambda: options.training_defaults(learning_rate=2e-5, epochs=1,
                                                                          batch_size=32))
    """sentence_transformers.SentenceTransformerTrainingArguments (= transformers.TrainingArguments), passed
    through (fp16/bf16 come from precision)."""

    def __post_init__(self):  # `bertkit validate` catches values that cannot work, before anything is loaded
        checks.check_recipe(self, has_eval=self.data.eval is not None)
        batch = self.train.get("per_device_train_batch_size", 8)
        if self.loss != "cosent" and isinstance(batch, int) and batch < 2:
            raise BertkitError(f"train.per_device_train_batch_size={batch}: loss={self.loss} takes its negatives "
                               f"from the other rows of a batch, and a batch of 1 has none — use at least 2")
        dims = self.matryoshka_dims
        if dims is not None and not dims:
            raise ConfigValueError("matryoshka_dims", "config key 'matryoshka_dims' is an empty list, which gives no "
                                   "sizes to train — give them largest first, e.g. matryoshka_dims=[384,256,128,64], "
                                   "or leave the key out (null: full-size vectors only)")
        if dims and sorted(set(dims), reverse=True) != dims:  # largest first, each size once
            raise ConfigValueError("matryoshka_dims", f"config key 'matryoshka_dims' is {dims}: give the sizes largest "
                                   f"first, each once, e.g. {sorted(set(dims), reverse=True)}")
        if self.lora.enabled and not self.lora.merge:
            raise BertkitError("lora.merge=false is not available for embed: sentence-transformers would save the "
                               "adapter alone, which SentenceTransformer(path) loads only with peft installed — use "
                               "lora.merge=true (the default: the merged model, a stock folder)")
