"""The `rerank` recipe's config: its keys, types, defaults and help, checked by `bertkit validate` and
`bertkit run` before anything heavy is imported (this module imports no torch, transformers or datasets).
recipes/rerank.py is the recipe that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from bertkit import checks, options, tasks
from bertkit.config import INLINE
from bertkit.errors import BertkitError, ConfigValueError
from bertkit.tasks.retrieval_files import RetrievalColumns


@dataclass
class DataConfig:
    train: str | None = None
    """Training file (csv, tsv, json, jsonl, parquet): pairs with a label, query groups, or FlagEmbedding JSONL."""
    eval: str | None = None
    """Dev file of queries with their positive passage(s): re-ranked each epoch, picks the best checkpoint."""
    corpus: str | None = None
    """More passages (a .txt line each, or a table): candidates of the dev ranking and of negative mining."""
    columns: RetrievalColumns = field(default_factory=RetrievalColumns, metadata=INLINE)
    max_length: checks.MaxLength = 256
    """Tokens per (query, passage) pair, [CLS] and [SEP]s included; the longer segment is cut first."""



@dataclass
class EvalConfig:
    top_k: Annotated[int, Field(ge=1, le=100)] = 20
    """Candidates per dev query taken from the first stage and re-ranked."""



@dataclass
class Config:
    model: str = options.pretrained_model()
    run: options.RunOptions = field(default_factory=lambda: options.RunOptions(output_dir="runs/rerank"),
                                    metadata=INLINE)
    data: DataConfig = field(default_factory=DataConfig)
    loss: Literal["bce", "lambda", "listnet"] = "bce"
    """bce: BinaryCrossEntropyLoss on each pair; lambda (LambdaLoss) or listnet (ListNetLoss): each query's group."""
    negatives_per_query: Annotated[int, Field(ge=0)] = 3
    """Negatives mined per query when the training file has none (0: mine none)."""
    first_stage: str = "bm25"
    """What the dev evaluation re-ranks (and, when an embed model, what mines with BM25): bm25 or an embed run."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    tune: options.FineTuning = field(default_factory=options.FineTuning, metadata=INLINE)
    # measured on XQuAD-en from all-MiniLM-L6-v2 (docs/benchmarks.md#first-stage): at 2e-5 for one epoch the reranker
    # alone re-ranked BM25's top-20 to 0.513 NDCG@10 (BM25 0.965); at 5e-5 for two epochs to 0.970, fused 0.982
    train: dict = field(default_factory=lambda: options.training_defaults(learning_rate=5e-5, epochs=2,
                                                                          batch_size=16, eval_batch_size=64))
    """CrossEncoderTrainingArguments (transformers.TrainingArguments keys), passed through (fp16/bf16: precision)."""

    def __post_init__(self):  # `bertkit validate` catches values that cannot work, before anything is loaded
        checks.check_recipe(self, has_eval=self.data.eval is not None)
        checks.check_data_file(self.data.corpus, "data.corpus", False)
        check_first_stage(self.first_stage)
        if self.tune.search.trials or self.tune.seeds:
            raise BertkitError("search.trials / seeds are not available for rerank yet — remove them and train once")



def check_first_stage(first_stage: str) -> None:
    """first_stage is bm25 or an embedding model folder (an embed run's output_dir), said where it is set: else the
    mistake showed only at the dev evaluation, after mining and training."""
    if first_stage == "bm25":
        return
    if not Path(first_stage).is_dir():
        raise ConfigValueError("first_stage", f"config key 'first_stage' is {first_stage!r}, neither bm25 nor a folder "
                               "— give first_stage=bm25 or the output_dir of an embed run")
    if tasks.sentence_transformers_kind(first_stage) != "embed":
        raise ConfigValueError("first_stage", f"config key 'first_stage': {first_stage} is not an embedding model "
                               "folder (an embed run's output_dir or a sentence-transformers model) — give one, or "
                               "first_stage=bm25")
