"""Fine-tune a cross-encoder reranker: a (query, passage) pair in, one relevance score out (sentence-transformers).

    bertkit run rerank -c rerank/en_qa
    bertkit run rerank data.train=train.jsonl data.eval=dev.jsonl loss=lambda first_stage=runs/embed

Training rows are (query, passage, label 0/1 or a score in [0, 1]) or query groups (query, positive(s),
negative(s); FlagEmbedding's {"query", "pos": [...], "neg": [...]}), read by bertkit/tasks/retrieval_files.py. A
file with positives only gets `negatives_per_query` negatives mined for each query from the training passages
(and data.corpus; never the dev passages): BM25, plus the first_stage embed model when one is given. Losses: bce
(BinaryCrossEntropyLoss, a row per pair) or a listwise loss over each query's group (lambda: LambdaLoss, listnet:
ListNetLoss).

The model is sentence-transformers' CrossEncoder (a sequence classifier with one label) whose transformer is
bertkit's own BERT where the model is BERT (its unpadded path), transformers' class otherwise; the saved folder is
the stock layout, loaded by `CrossEncoder(path)` and `AutoModelForSequenceClassification` with no trust_remote_code.
Evaluation re-ranks each dev query's top eval.top_k of a first stage (BM25 over the dev passages and data.corpus,
or `first_stage=EMBED_RUN`) and reports NDCG@10 / MRR@10 / Recall@10 before (the first stage alone) and after,
in the console, metrics.json and the model card; during training sentence-transformers' CrossEncoderRerankingEvaluator
scores each epoch on the same candidates and picks the best checkpoint.
"""

from __future__ import annotations


from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer, CrossEncoderTrainingArguments
from sentence_transformers.cross_encoder.evaluation import CrossEncoderRerankingEvaluator
from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss, LambdaLoss, ListNetLoss

from bertkit import BertkitForSequenceClassification, checkpoints, console, families, tasks, training
from bertkit.console import say, warn
from bertkit.errors import BertkitError
from bertkit.llrd import optimizer_with_llrd
from bertkit.precision import resolve_precision
from bertkit.tasks import rerank as task
from bertkit.tasks.retrieval_files import distinct_texts, mine_negatives, read_corpus
# the recipe's keys: its Config imports no model stack, so that `bertkit validate` reads it alone
from bertkit.recipe_configs.rerank_config import DataConfig, EvalConfig, Config


SELECTION = "dev_ndcg@10"  # the evaluator's key (Trainer adds eval_)
ONE_SCORE = {"num_labels": 1, "id2label": {0: "LABEL_0"}, "label2id": {"LABEL_0": 0}}  # CrossEncoder's one label
NEW_HEAD_LR = 1.0e-3  # a new one-score head's learning rate unless head_lr is set (docs/benchmarks.md#retrieval)


def settings(cfg: Config, fusion_weight: float) -> task.Settings:
    """What predict / evaluate need of this run, saved in the model's config.json."""
    return task.Settings(cfg.data.max_length, cfg.data.columns, cfg.first_stage, cfg.eval.top_k, fusion_weight)


def load_data(cfg: Config):
    """Training rows (negatives mined when the file has none), the dev ranking task, and the corpus of passages."""
    if not cfg.data.train:
        raise BertkitError("no training data — set data.train=<file> (query, passage, label rows or query groups)")
    train = task.read_examples(cfg.data.train, cfg.data.columns)
    dev = task.read_examples(cfg.data.eval, cfg.data.columns, allow_no_positive=True) if cfg.data.eval else None
    corpus = read_corpus(cfg.data.corpus) if cfg.data.corpus else []
    if train.kind == "pairs" and not train.has_negatives and cfg.negatives_per_query:
        # never the dev passages: mined as negatives of training queries they put the dev set into training and
        # teach its answers as irrelevant (on the en_qa sample 81 of 208 mined negatives were dev paragraphs)
        passages = distinct_texts(train.rows, corpus)
        embed = cfg.first_stage != "bm25"
        if embed:  # the embed model ranks too (sentence-transformers' mine_hard_negatives), BM25 fills up
            from sentence_transformers import SentenceTransformer

            embed = SentenceTransformer(cfg.first_stage, device="cpu", local_files_only=True)
        mined = mine_negatives(train.rows, passages, model=embed or None, bm25=True,
                               num_negatives=cfg.negatives_per_query)
        task.warn_mined(mined, cfg.negatives_per_query)
        train.rows = mined.rows
        say(f"mined {mined.negatives} negatives for {len(mined.rows)} queries from {len(passages)} passages "
            f"({'BM25' if not embed else 'the first-stage model, then BM25'})")
    rows = task.encode(train, cfg.loss)
    rerank_dev = task.first_stage_dev(dev, corpus, cfg.first_stage, cfg.eval.top_k) if dev else None
    say(f"{len(rows)} training {'pairs' if cfg.loss == 'bce' else 'query groups'} from {len(train.rows)} rows"
        + (f"; {len(rerank_dev.queries)} dev queries over {len(rerank_dev.corpus)} passages" if rerank_dev else ""))
    return rows, rerank_dev


def build_model(cfg: Config, model_path: str) -> CrossEncoder:
    """sentence-transformers' CrossEncoder with one label, its transformer replaced by bertkit's own BERT where the
    model is BERT (the same parameter names: the saved folder stays stock BertForSequenceClassification)."""
    config = checkpoints.task_config(model_path, **ONE_SCORE)
    training.check_positions(cfg.data.max_length, config)
    # a classifier of another width (a classify run) keeps its body and gets a new one-score head, said as the
    # model loads (checkpoints.load_pretrained), instead of a size-mismatch error
    # sentence-transformers' "Converting SentenceTransformer model ... to CrossEncoder": the run names the new head
    with console.library_line_to_run_log("sentence_transformers.base.model", "Converting "):
        model = CrossEncoder(model_path, num_labels=1, max_length=cfg.data.max_length, device="cpu",
                             model_kwargs={"ignore_mismatched_sizes": True},
                             config_kwargs={key: value for key, value in ONE_SCORE.items() if key != "num_labels"})
    if families.family_of(config).implementation == "bertkit":
        model[0].model = checkpoints.load_pretrained(BertkitForSequenceClassification, model_path, config=config,
                                                     ignore_mismatched_sizes=True)
    return model


def head_learning_rate(cfg: Config, model_path: str) -> float | None:
    """The one-score head's learning rate: head_lr as set; else, when the start has no trained one-score head (a
    bi-encoder such as all-MiniLM-L6-v2, a plain BERT, an MLM run, a classifier of another width), NEW_HEAD_LR,
    said: at the body's rate a random head leaves the loss at chance and the ranking random (docs/retrieval.md)."""
    if cfg.tune.head_lr is not None:
        return cfg.tune.head_lr
    if task.has_one_score_head(checkpoints.load_model_config(model_path)):
        return None
    say(f"{cfg.model} has no trained one-score head, so the new one learns at head_lr={NEW_HEAD_LR:g} while the body "
        f"learns at train.learning_rate (set head_lr to change it)")
    return NEW_HEAD_LR


def loss_for(cfg: Config, model: CrossEncoder):
    return {"bce": BinaryCrossEntropyLoss, "lambda": LambdaLoss, "listnet": ListNetLoss}[cfg.loss](model)


def final_metrics(model: CrossEncoder, dev: task.RerankDev, batch_size: int) -> tuple[dict, float]:
    """NDCG@10 / MRR@10 / Recall@10 of the first stage, of the final model's re-ranking alone (`reranker_...`) and
    of the fused score whose weight is tuned here (task.tune_fusion: never below the first stage on dev), which
    predict and evaluate then use; and that weight. The measures are retrieval_files', as `bertkit evaluate`'s."""
    def score(queries, passages):
        return model.predict(list(zip(queries, passages)), batch_size=batch_size, show_progress_bar=False)
    scores = task.rerank_scores(score, dev)
    alone = task.compute_metrics_fn(dev)(scores)
    weight, tried = task.tune_fusion(dev, scores)
    fused = task.compute_metrics_fn(dev, weight)(scores)
    return {**fused, **{f"reranker_{name}": alone[name] for name in task.REPORTED},
            "fusion_ndcg@10": {str(w): round(v, 4) for w, v in tried.items()}}, weight


def main(cfg: Config) -> dict:
    run = training.start_run(cfg, "rerank")  # seed; hold output_dir (an old run is refused unless overwrite=true)
    model_path = checkpoints.resolve_model(cfg.model)
    train, dev = load_data(cfg)
    model = build_model(cfg, model_path)
    evaluator = CrossEncoderRerankingEvaluator(dev.samples(), at_k=10, always_rerank_positives=False, name="dev",
                                               batch_size=cfg.train.get("per_device_eval_batch_size", 64),
                                               write_csv=False) if dev else None

    flags, message = resolve_precision(cfg.run.precision)
    say(message)
    arguments = training.trainer_kwargs(cfg.train, cfg.run.output_dir, cfg.run.seed, dev is not None, SELECTION)
    try:
        args = CrossEncoderTrainingArguments(**arguments, **flags, disable_tqdm=True)
    except (ValueError, TypeError) as error:
        raise training.arguments_refused(error) from None
    head_lr = head_learning_rate(cfg, model_path)
    trainer = CrossEncoderTrainer(
        model=model, args=args, train_dataset=train, loss=loss_for(cfg, model), evaluator=evaluator,
        optimizers=(optimizer_with_llrd(model[0].model, args, cfg.tune.llrd, head_lr), None),
        callbacks=training.early_stopping(cfg, dev is not None))
    trainer.add_callback(training.LossGuard(trainer))  # a NaN / exploding loss stops the run in one line
    with run.training(trainer) as checkpoint:  # the replaced run cleared now; a full disk is one line
        train_result = trainer.train(resume_from_checkpoint=checkpoint)

    metrics, weight = final_metrics(trainer.model, dev, args.per_device_eval_batch_size) if dev else ({}, 1.0)
    if metrics:
        task.say_metrics(metrics)
    worse = task.worse_than_first_stage(metrics) if metrics else None  # repeated after the summary table
    setattr(trainer.model[0].model.config, tasks.SETTINGS_KEY, tasks.settings_dict(settings(cfg, weight)))
    results = run.results(metrics, train_result, selection_metric="ndcg@10", loss=cfg.loss,
                          **({"warnings": [worse]} if worse else {}))
    with run.saving(trainer):  # the completion record removed first, written last (rank 0)
        trainer.save_model(str(run.output_dir))  # CrossEncoder.save_pretrained: the stock layout
        run.save_files(trainer, results, "ndcg@10")  # metrics.json, curve, resolved config, model card
    rows = {f"{name} (first stage -> reranker -> fused)": f"{metrics[f'first_stage_{name}']:.4f} -> "
            f"{metrics[f'reranker_{name}']:.4f} -> {metrics[name]:.4f}" for name in task.REPORTED} if metrics else {}
    if metrics:
        rows["fusion weight (reranker's share)"] = f"{weight:g}" + (" — the reranker adds nothing: the first "
                                                                    "stage's order is kept" if weight == 0 else "")
    if worse:
        rows["warning"] = f"the reranker alone is WORSE than {cfg.first_stage} alone (see below)"
    training.report(cfg, "rerank", f"rerank: {cfg.loss} loss, dev re-ranking of the {cfg.first_stage} top-"
                    f"{cfg.eval.top_k}", {**rows, "wall time (s)": results["wall_time_s"]}, run.output_dir)
    if worse:
        warn(worse)
    return results


__all__ = ["Config", "DataConfig", "EvalConfig", "main"]
