"""Fine-tune an embedding model (a bi-encoder, sentence-transformers) for retrieval or semantic similarity.

    bertkit run embed -c embed/en_qa
    bertkit run embed data.train=pairs.jsonl data.eval=dev.jsonl data.corpus=corpus.txt loss=cached_mnrl
    bertkit run embed -c embed/en_sts                    # scored pairs (sentence1, sentence2, score), CoSENT
    bertkit mine --model all-MiniLM-L6-v2 --corpus corpus.txt pairs.jsonl -o with_negatives.jsonl

Training files hold pairs (query, positive), triplets / groups (query, positive, negative(s); FlagEmbedding's
{"query", "pos": [...], "neg": [...]}) or scored pairs (bertkit/tasks/retrieval_files.py). Losses: in-batch
negatives (loss=mnrl; `scale` is 1/temperature), its cached variant (loss=cached_mnrl: GradCache, so a batch of 256+
fits in memory, `mini_batch_size` per forward), CoSENT for scored pairs (loss=cosent), optionally wrapped in
Matryoshka (`matryoshka_dims`). Batches hold no duplicate text by default (a duplicate is a false negative).

Pooling and normalisation come from the model's own sentence-transformers files when it has them (MiniLM: mean,
normalised), else `pooling=` (mean assumed, said). The query / passage prefixes are saved as the model's prompts.
The dev split is evaluated before and after training by sentence-transformers' evaluators: every dev query ranks
the dev corpus (all dev positives and negatives, plus data.corpus) for NDCG@10, MRR@10, Recall@1/10/100, or Spearman
for scored pairs; base and fine-tuned are printed side by side and written to metrics.json. The saved directory is
a stock sentence-transformers folder (SentenceTransformer(path) loads it with no trust_remote_code; its BERT is
plain transformers BertModel layout), trained on bertkit's own BERT (its unpadded path) where the model is BERT.
seeds=[...] (mean ± sd of the dev metrics), search.trials and lora.* work as in the other recipes; LoRA adapters are
merged before the save, so the folder stays stock.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import asdict

import datasets
from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.base.evaluation.evaluator import BaseEvaluator
from sentence_transformers.base.sampler import BatchSamplers
from sentence_transformers.sentence_transformer.model_card import SentenceTransformerModelCardCallback
from sentence_transformers.sentence_transformer.evaluation import (EmbeddingSimilarityEvaluator,
                                                                   InformationRetrievalEvaluator)
from sentence_transformers.sentence_transformer.losses import (CachedMultipleNegativesRankingLoss, CoSENTLoss,
                                                               MatryoshkaLoss, MultipleNegativesRankingLoss)

from bertkit import checkpoints, training
from bertkit.console import say, warn
from bertkit.errors import BertkitError
from bertkit.llrd import optimizer_with_llrd
from bertkit.precision import resolve_precision
from bertkit.search import search_or_seeds
from bertkit.tasks import embed as task
from bertkit.tasks.first_stage import Retriever
from bertkit.tasks.first_stage import save as save_retriever
from bertkit.tasks.retrieval_files import RetrievalData, ir_dev_set, read_corpus
# the recipe's keys: its Config imports no model stack, so that `bertkit validate` reads it alone
from bertkit.recipe_configs.embed_config import Config


SELECTION = {"pairs": "ndcg@10", "scored": "spearman"}
# sentence-transformers' evaluator names -> bertkit's (DevMetrics)
METRIC_NAMES = {"dev_cosine_ndcg@10": "ndcg@10", "dev_cosine_mrr@10": "mrr@10",
                **{f"dev_cosine_recall@{k}": f"recall@{k}" for k in (1, 10, 100)},
                "dev_spearman_cosine": "spearman", "dev_pearson_cosine": "pearson"}


def resolve_pooling(cfg: Config, model_path: str) -> tuple[str, bool]:
    """pooling=auto and normalize=null from the model's own files; a model without them: mean, normalised (said)."""
    saved_mode, saved_norm = task.saved_pooling(model_path)
    pooling = cfg.pooling
    if pooling == "auto":
        if saved_mode is None:
            warn(f"{cfg.model} has no sentence-transformers pooling information (no modules.json): mean pooling "
                 f"assumed — set pooling=cls or pooling=mean to choose")
        pooling = saved_mode or "mean"
    normalize = cfg.normalize if cfg.normalize is not None else (saved_norm if saved_norm is not None else True)
    cfg.pooling, cfg.normalize = pooling, normalize  # the resolved config records what trained
    return pooling, normalize


def build(cfg: Config, model_path: str, pooling: str, normalize: bool):
    """A fresh SentenceTransformer to fine-tune (a search or seed band builds one per training): bertkit's BERT
    inside where the model is BERT, the prefixes as its prompts, LoRA adapters on the backbone when lora.enabled
    (peft; merged before the save, so the folder stays stock)."""
    model = task.build_model(model_path, pooling, normalize, cfg.data.max_length)
    size = model.get_embedding_dimension()  # known once the model is built: said before the dev evaluation
    if cfg.matryoshka_dims and cfg.matryoshka_dims[0] > size:
        raise BertkitError(f"matryoshka_dims={cfg.matryoshka_dims}: the model's vectors have {size} dimensions — "
                           f"give sizes up to {size}")
    task.set_prefixes(model, cfg.query_prefix, cfg.passage_prefix)  # saved in config_sentence_transformers.json
    if cfg.lora.enabled:
        model[0].model = training.add_lora(model[0].auto_model, cfg.lora, task_type=None)
    model.config = model[0].auto_model.config  # bertkit's run wiring reads model.config (family, fp16 check)
    model.model_card_data.generate_widget_examples = False  # bertkit's card replaces sentence-transformers' own
    return model


def merge_lora(trainer, cfg: Config) -> None:
    """Before the save: the LoRA adapters merged into the backbone (lora.merge is always true for embed)."""
    if cfg.lora.enabled:
        trainer.model[0].model = trainer.model[0].auto_model.merge_and_unload()


def load_data(cfg: Config) -> tuple[RetrievalData, RetrievalData | None, list[str]]:
    """Training and dev files read and checked, and the extra corpus for the dev ranking."""
    if not cfg.data.train:
        raise BertkitError("no training data — set data.train=<file> (query, positive pairs; jsonl or csv)")
    train = task.read_examples(cfg.data.train, cfg.data.columns)
    task.check_training_data(train, cfg.loss, cfg.train.get("per_device_train_batch_size", 8))
    dev = task.read_examples(cfg.data.eval, cfg.data.columns, allow_no_positive=True) if cfg.data.eval else None
    if dev is not None and dev.kind != train.kind:
        raise BertkitError(f"{dev.path} holds {dev.kind} rows but {train.path} holds {train.kind} — give a dev "
                           f"file of the training file's kind")
    corpus = read_corpus(cfg.data.corpus) if cfg.data.corpus else []
    if dev is not None and dev.kind == "pairs":
        ir_dev_set(dev, corpus)  # a dev file with nothing to rank is said now, before any model is loaded
    negatives = sum(len(row.negatives) for row in train.rows)
    say(f"{len(train.rows)} train / {len(dev.rows) if dev else 0} dev {train.kind} rows (query={train.columns.query},"
        f" positive={train.columns.positive}{f', {negatives} negatives' if negatives else ''}"
        f"{f', score={train.columns.score}' if train.kind == 'scored' else ''})"
        f"{f'; {len(corpus)} more corpus passages' if corpus else ''}")
    return train, dev, corpus


def training_dataset(data: RetrievalData, seed: int = 42) -> datasets.Dataset:
    """The columns sentence-transformers' losses read by position: (anchor, positive, negative_1..n) with one row
    per (query, positive) and the same n for every row, or (sentence1, sentence2, score). n is the count most rows
    have (`negatives_per_row`): a row with more gives its first n, and one with fewer is filled with random passages
    of other queries, both said — taking the fewest instead would drop every mined negative when one query got none."""
    if data.kind == "scored":
        return datasets.Dataset.from_dict({"sentence1": [r.query for r in data.rows],
                                           "sentence2": [r.positives[0] for r in data.rows],
                                           "score": [r.score for r in data.rows]})
    n = negatives_per_row(data)
    fill = random_negatives(data, n, seed)
    columns = {"anchor": [], "positive": [], **{f"negative_{i + 1}": [] for i in range(n)}}
    for index, row in enumerate(data.rows):
        negatives = (row.negatives + fill.get(index, []))[:n]
        for positive in row.positives:
            columns["anchor"].append(row.query)
            columns["positive"].append(positive)
            for i in range(n):
                columns[f"negative_{i + 1}"].append(negatives[i])
    return datasets.Dataset.from_dict(columns)


def negatives_per_row(data: RetrievalData) -> int:
    """The number of negatives most rows have (the larger on a tie), said when rows differ."""
    counts = Counter(len(row.negatives) for row in data.rows)
    n = max(counts, key=lambda count: (counts[count], count))
    more = sum(len(row.negatives) - n for row in data.rows if len(row.negatives) > n)
    fewer = sum(1 for row in data.rows if len(row.negatives) < n)
    if more or fewer:
        say(f"negatives per row: {n}, the count most rows have"
            + (f"; {more} negatives of rows with more are left out" if more else "")
            + (f"; {fewer} rows with fewer get random passages of other queries as the rest" if fewer else ""))
    return n


def random_negatives(data: RetrievalData, n: int, seed: int) -> dict[int, list[str]]:
    """For each row with fewer than n negatives, random passages of the other rows (never one of its own): the
    in-batch loss treats them as it treats the rest of the batch."""
    passages = list(dict.fromkeys(p for row in data.rows for p in [*row.positives, *row.negatives]))
    rng, fill = random.Random(seed), {}
    for index, row in enumerate(data.rows):
        missing = n - len(row.negatives)
        if missing <= 0:
            continue
        own, chosen = {*row.positives, *row.negatives}, []
        for _ in range(100 * missing):  # draws, not a scan of every passage per row: a large file stays linear
            passage = rng.choice(passages)
            if passage not in own and passage not in chosen:
                chosen.append(passage)
                if len(chosen) == missing:
                    break
        else:
            raise BertkitError(f"{data.path}: {row.where} has {len(row.negatives)} negatives where most rows have "
                               f"{n}, and too few other passages can fill them — give it negatives (bertkit mine), "
                               "or give every row the same number")
        fill[index] = chosen
    return fill


def build_loss(cfg: Config, model):
    """The loss, in plain sight: in-batch negatives (plain or cached), or CoSENT; wrapped by Matryoshka."""
    if cfg.loss == "mnrl":
        loss = MultipleNegativesRankingLoss(model, scale=cfg.scale)
    elif cfg.loss == "cached_mnrl":
        loss = CachedMultipleNegativesRankingLoss(model, scale=cfg.scale, mini_batch_size=cfg.mini_batch_size)
    else:
        loss = CoSENTLoss(model, scale=cfg.scale)
    if cfg.matryoshka_dims:  # sizes checked against the model's vectors in build()
        loss = MatryoshkaLoss(model, loss, matryoshka_dims=cfg.matryoshka_dims)
    return loss


def build_evaluator(dev: RetrievalData | None, corpus: list[str], batch_size: int):
    """sentence-transformers' evaluator of the dev split: every query ranks the dev corpus (IR metrics), or
    Spearman of cosine similarity for scored pairs; None without a dev split."""
    if dev is None:
        return None
    if dev.kind == "scored":
        return DevMetrics(EmbeddingSimilarityEvaluator([r.query for r in dev.rows], [r.positives[0] for r in dev.rows],
                                            [r.score for r in dev.rows], batch_size=batch_size, name="dev"))
    ir = ir_dev_set(dev, corpus)
    if ir.left_out:
        say(f"{ir.left_out} dev queries without a positive are left out of the ranking")
    say(f"dev ranking: {len(ir.queries)} queries over {len(ir.corpus)} passages")
    return DevMetrics(InformationRetrievalEvaluator(ir.queries, ir.corpus, ir.relevant, mrr_at_k=[10], ndcg_at_k=[10],
                                         accuracy_at_k=[1, 10], precision_recall_at_k=[1, 10, 100], map_at_k=[100],
                                         batch_size=batch_size, name="dev", write_csv=False,
                                         query_prompt_name=task.QUERY, corpus_prompt_name=task.DOCUMENT))


def dev_metrics(evaluator, model) -> dict:
    """The evaluator's headline numbers under bertkit's names (ndcg@10, mrr@10, recall@k; spearman)."""
    if evaluator is None:
        return {}
    return evaluator(model)


class DevMetrics(BaseEvaluator):
    """sentence-transformers' evaluator (IR or similarity) with its headline scores under bertkit's names (ndcg@10,
    mrr@10, recall@k; spearman, pearson): Trainer then logs eval_ndcg@10 and picks the best checkpoint by it, and a
    seed band or search, metrics.json, the report and `bertkit runs` all name a metric one way."""

    def __init__(self, evaluator):
        super().__init__()
        self.evaluator = evaluator
        self.primary_metric = "spearman" if isinstance(evaluator, EmbeddingSimilarityEvaluator) else "ndcg@10"

    def __call__(self, model, output_path=None, epoch: int = -1, steps: int = -1) -> dict:
        scores = self.evaluator(model, output_path, epoch, steps)
        return {ours: scores[theirs] for theirs, ours in METRIC_NAMES.items() if theirs in scores}


class CardWithoutWidget(SentenceTransformerModelCardCallback):
    """sentence-transformers' model-card callback without the widget examples it samples as the Trainer is built
    (a "Computing widget examples" progress bar, which generate_widget_examples=False does not skip in 6.3): bertkit
    writes its own README.md over sentence-transformers' card (bertkit/model_card.py), so they would go unused."""

    def on_init_end(self, args, state, control, model, trainer, **kwargs):
        model.model_card_data.set_widget_examples = lambda dataset: None  # an instance attribute over the method
        try:
            super().on_init_end(args, state, control, model=model, trainer=trainer, **kwargs)
        finally:
            del model.model_card_data.set_widget_examples


class EmbedTrainer(SentenceTransformerTrainer):
    """SentenceTransformerTrainer with bertkit's LLRD AdamW over the backbone's layers (bertkit/llrd.py) and the
    loss guard that stops a diverged run (bertkit/training.py), as FineTuningTrainer gives the other recipes."""

    model_card_callback_class = CardWithoutWidget

    def __init__(self, *args, llrd: float = 1.0, head_lr: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.llrd, self.head_lr = llrd, head_lr
        self.add_callback(training.LossGuard(self))

    def _load_from_checkpoint(self, checkpoint_path: str) -> None:
        """The best checkpoint (load_best_model_at_end) or the one resumed from. sentence-transformers reloads a
        checkpoint as a new SentenceTransformer and copies its state dict over, but a LoRA backbone (a PeftModel)
        reloads with the adapter injected rather than wrapped, under other weight names: its adapter's own weights
        are loaded instead (the rest is frozen, so unchanged)."""
        from peft import PeftModel, load_peft_weights, set_peft_model_state_dict

        backbone = self.model[0].auto_model
        if not isinstance(backbone, PeftModel):
            return super()._load_from_checkpoint(checkpoint_path)
        set_peft_model_state_dict(backbone, load_peft_weights(checkpoint_path, device=str(backbone.device)))

    def create_optimizer(self, model=None):
        if self.optimizer is None:  # the backbone's parameters are the model's (Pooling / Normalize have none)
            self.optimizer = optimizer_with_llrd(self.model[0].auto_model, self.args, self.llrd, self.head_lr)
        return self.optimizer if self.optimizer is not None else super().create_optimizer(model)


def training_arguments(cfg: Config, has_eval: bool, selection: str) -> SentenceTransformerTrainingArguments:
    """bertkit's TrainingArguments keywords (training.trainer_kwargs) plus what sentence-transformers adds: the
    batch sampler and the prefixes as prompts per column."""
    flags, message = resolve_precision(cfg.run.precision)
    say(message)
    args = {**training.trainer_kwargs(cfg.train, cfg.run.output_dir, cfg.run.seed, has_eval, selection), **flags}
    args.setdefault("disable_tqdm", True)
    sampler = cfg.batch_sampler if cfg.batch_sampler != "auto" else (
        "batch_sampler" if cfg.loss == "cosent" else "no_duplicates")
    try:
        return SentenceTransformerTrainingArguments(**args, batch_sampler=BatchSamplers(sampler))
    except (ValueError, TypeError) as error:
        raise training.arguments_refused(error) from None


def prompts(cfg: Config, dataset: datasets.Dataset) -> dict[str, str] | None:
    """Per training column, the prefix sentence-transformers puts before its texts (None: no prefixes)."""
    if not (cfg.query_prefix or cfg.passage_prefix):
        return None
    first = dataset.column_names[0]
    return {name: cfg.query_prefix if name == first else cfg.passage_prefix
            for name in dataset.column_names if name != "score"}


def summary_rows(results: dict) -> dict:
    """Base and fine-tuned dev metrics side by side, then the first stages' NDCG@10 and the one chosen, then the
    wall time; after a seed band the base model's on rows of their own (training.report shows each fine-tuned metric
    as mean ± sd over the seeds)."""
    base, tuned = results.get("base_eval", {}), results.get("eval", {})
    if "seeds" in results:
        rows = {**{f"{name} (base)": f"{base[name]:.4f}" for name in tuned if name in base}, **tuned}
    else:
        rows = {name: f"{base[name]:.4f} -> {tuned[name]:.4f}" for name in tuned if name in base}
    stages = results.get("first_stage")
    if stages:
        rows.update({f"{name} ndcg@10": f"{stages['base'][name]['ndcg@10']:.4f} -> {row['ndcg@10']:.4f}"
                     for name, row in stages["fine_tuned"].items()})
        rows["retriever"] = describe_choice(stages["retriever"])
    return {**rows, "wall time (s)": results["wall_time_s"]}


def describe_choice(retriever: dict) -> str:
    kind = retriever["kind"]
    if kind == "hybrid":
        return "hybrid, rrf" if retriever["fusion"] == "rrf" else f"hybrid, weight {retriever['weight']:g} on the model"
    return kind


def first_stage(cfg: Config, model, dev: RetrievalData | None, corpus: list[str], batch_size: int):
    """The first stages on dev (pairs): BM25, the model and their fusion, and the one chosen (cfg.retriever);
    (None, {}) without such a dev set."""
    if dev is None or dev.kind != "pairs":
        return None, {}
    return task.choose_retriever(model, dev, corpus, cfg.retriever, cfg.fusion, cfg.bm25_chinese, batch_size)


def untuned_retriever(cfg: Config) -> Retriever | None:
    """retriever= set by name without a dev set of pairs to tune on: that one (a hybrid at weight 0.5), said."""
    if cfg.retriever == "auto":
        return None
    retriever = Retriever(cfg.retriever, 0.5, cfg.fusion, cfg.bm25_chinese)
    if cfg.retriever == "hybrid":
        say("retriever=hybrid with no dev set of pairs to tune its weight on: 0.5 (set data.eval to tune it)")
    return retriever


def main(cfg: Config) -> dict:
    run = training.start_run(cfg, "embed")  # seed; hold output_dir (an old run there is refused unless overwrite=true)
    model_path = checkpoints.resolve_model(cfg.model)
    pooling, normalize = resolve_pooling(cfg, model_path)
    train, dev, corpus = load_data(cfg)
    model = build(cfg, model_path, pooling, normalize)  # bertkit's BERT inside
    cfg.data.max_length = model.max_seq_length
    train_dataset = training_dataset(train, cfg.run.seed)
    eval_batch = cfg.train.get("per_device_eval_batch_size", 64)
    evaluator = build_evaluator(dev, corpus, eval_batch)
    base = dev_metrics(evaluator, model)
    if base:
        say("base model on dev: " + ", ".join(f"{k} {v:.4f}" for k, v in base.items()))
    _, base_stages = first_stage(cfg, model, dev, corpus, eval_batch)

    args = training_arguments(cfg, dev is not None, SELECTION[train.kind])
    args.prompts = prompts(cfg, train_dataset)
    # a search or seed band rebuilds the model for every training (the loss then follows each new model)
    model, model_init = training.model_or_builder(cfg, lambda: build(cfg, model_path, pooling, normalize), model)
    trainer = EmbedTrainer(model=model, model_init=model_init, args=args, train_dataset=train_dataset,
                           loss=lambda model: build_loss(cfg, model), evaluator=evaluator,
                           callbacks=training.early_stopping(cfg, dev is not None), llrd=cfg.tune.llrd,
                           head_lr=cfg.tune.head_lr)
    with run.training(trainer) as checkpoint:  # the replaced run cleared now; a full disk is one line
        if training.several_trainings(cfg):  # search.trials or seeds: the chosen run's model is left on the trainer
            train_result = search_or_seeds(trainer, cfg)
        else:
            train_result = trainer.train(resume_from_checkpoint=checkpoint)

    merge_lora(trainer, cfg)
    metrics = dev_metrics(evaluator, trainer.model)
    retriever, stages = first_stage(cfg, trainer.model, dev, corpus, eval_batch)
    retriever = retriever or untuned_retriever(cfg)
    selection = training.selection_metric(args, SELECTION[train.kind])
    extra = {"first_stage": {"base": base_stages, "fine_tuned": stages, "retriever": asdict(retriever)}} if stages \
        else {}
    results = run.results(metrics, train_result, base_eval=base, selection_metric=selection,
                          rows={"train": len(train_dataset), "dev_queries": len(dev.rows) if dev else 0},
                          pooling=pooling, normalize=normalize, **extra)
    with run.saving(trainer):  # the completion record removed first, written last (rank 0)
        trainer.save_model(str(run.output_dir))  # the stock sentence-transformers folder (SentenceTransformer.save)
        if retriever is not None and trainer.is_world_process_zero():  # what predict --corpus and evaluate use
            save_retriever(run.output_dir, retriever)
        run.save_files(trainer, results, selection)  # metrics.json, curve, resolved config, model card
    training.report(cfg, "embed", f"embed: dev metrics, base -> fine-tuned ({train.kind})", summary_rows(results),
                    run.output_dir)
    return results
