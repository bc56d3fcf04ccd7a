"""Continue BERT's masked-LM pretraining on domain text (or pretrain from scratch), with held-out perplexity.

    bertkit run mlm data.train=data/corpus/en_medical.txt
    bertkit run mlm -c mlm/en_medical vocab.extend=true
    bertkit run mlm model=scratch:tiny data.train=data/corpus/en_medical.txt vocab.size=8000

Corpus: a .txt file (one paragraph per line, blank lines between documents) or csv/tsv/json/jsonl/parquet with a
text column. Masking is BERT's (15 %, 80/10/10), whole-word by default (rjieba words for a Chinese corpus), drawn
afresh each epoch; an example's mask is a function of (seed, epoch, the example's row), so a run on any number of
processes, or one resumed from a checkpoint, masks exactly as a single uninterrupted run does. The perplexity of a
held-out slice, masked once with a fixed seed (eval_seed), is measured before and after training; a checkpoint
without an MLM head (MiniLM) first trains its new head alone for head_warmup_steps, encoder frozen, so the "before"
figure is the pretrained encoder's and not a random head's (metrics.json says which it is). The output directory is a
valid model= for every fine-tuning recipe (the MLM head is dropped there, the encoder kept).

Data (bertkit/tasks/mlm/corpus.py): the corpus is read and tokenized through `datasets` into Arrow files in the datasets
cache (data.cache_dir, default HF_DATASETS_CACHE), by data.num_proc worker processes; examples are read from the
memory-mapped tokens, so memory stays flat in corpus size, and a rerun with the same corpus and tokenizer loads the
cache instead of tokenizing (also after a change of max_length, mode or seed). data.streaming=true reads a .txt
corpus as a stream instead (no cache; train.max_steps required; resumable to the same example).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

import datasets
import transformers

from bertkit import checkpoints, training
from bertkit.console import say
from bertkit.errors import BertkitError
from bertkit.tasks import mlm as task
from bertkit.tasks import settings_dict
from bertkit.tasks.mlm import corpus, vocabulary, whole_word_masking
# the recipe's keys: its Config imports no model stack, so that `bertkit validate` reads it alone
from bertkit.recipe_configs.mlm_config import Config


def num_proc(cfg: Config) -> int:
    return cfg.data.num_proc or corpus.default_num_proc()


def load_corpus(cfg: Config) -> corpus.Corpus:
    """The corpus in the datasets cache (memory-mapped), its held-out rows split off (or data.eval's)."""
    if not cfg.data.train:
        raise BertkitError("no corpus — set data.train=<file> (.txt with one paragraph per line, or a table)")
    return corpus.open_corpus(cfg.data.train, cfg.data.eval, cfg.data.eval_fraction, cfg.run.seed, cfg.data.text_column,
                              cfg.data.cache_dir, num_proc(cfg))


def build_model(cfg: Config, texts: Callable[[], Iterable[str]]) -> tuple:
    """(model, tokenizer, notes): a scratch model with a corpus-trained vocabulary, or a checkpoint with an MLM
    head (a new one if it had none) and, with vocab.extend, the domain words added. `texts` gives the training
    text afresh on each call (read from the cache a batch at a time)."""
    size = vocabulary.scratch_size(cfg.model)
    if size:
        if cfg.vocab.extend:
            raise BertkitError("vocab.extend adds words to a pretrained vocabulary; a scratch model's vocabulary is "
                               "trained on the corpus — set vocab.size instead")
        # tokenizer training is not deterministic: a resumed run reuses its tokenizer
        resumed = training.resume_checkpoint(cfg.run.resume, cfg.run.output_dir)
        tokenizer = (checkpoints.load_tokenizer(resumed) if resumed else
                     vocabulary.train_wordpiece(texts(), cfg.vocab.size, cfg.vocab.lowercase))
        config = vocabulary.scratch_config(size, len(tokenizer), max(512, cfg.data.max_length))
        model_class = transformers.AutoModelForPreTraining if cfg.nsp else transformers.AutoModelForMaskedLM
        say(f"from scratch: {size} BERT ({config.num_hidden_layers} layers, hidden "
            f"{config.hidden_size}), WordPiece vocabulary of {len(tokenizer):,} trained on the corpus")
        return model_class.from_config(config), tokenizer, {"mlm_head": "new", "scratch": size}
    model_path = checkpoints.resolve_model(cfg.model)
    tokenizer = checkpoints.load_tokenizer(model_path)
    model, notes = task.load_mlm_model(model_path, nsp=cfg.nsp)
    task.say_new_heads(cfg.model, notes, cfg.nsp)
    training.check_positions(cfg.data.max_length, model.config)
    if cfg.vocab.extend:
        if whole_word_masking.piece_marker(tokenizer) != whole_word_masking.WORDPIECE:
            raise BertkitError(f"vocab.extend adds words to a WordPiece vocabulary, and {cfg.model} has a "
                               f"{type(tokenizer).__name__} (byte-level BPE or SentencePiece): not supported — set "
                               "vocab.extend=false")
        notes["new_tokens"] = vocabulary.add_domain_words(model, tokenizer, texts(), cfg.vocab.max_new_tokens,
                                                          cfg.vocab.min_frequency, cfg.vocab.min_pieces)
    return model, tokenizer, notes


def build_examples(cfg: Config, tokens, rows, document, tokenizer, whole_word: str, seed: int,
                   limit: int | None = None):
    """Training or held-out examples, made on demand from the token table: NSP sentence pairs, or line windows /
    group blocks of the rows' paragraphs. Each carries its number as example_id (its masks' identity)."""
    if cfg.nsp:
        return corpus.NspPairs(tokens, rows, document, tokenizer, cfg.data.max_length, seed, whole_word, limit)
    view = corpus.LineWindows if cfg.data.mode == "line" else corpus.GroupBlocks
    return view(tokens, rows, cfg.data.max_length, tokenizer.cls_token_id, tokenizer.sep_token_id, limit)


def prepare_data(cfg: Config) -> tuple:
    """(model, tokenizer, notes, whole_word, train examples, warm-up examples, held-out examples) from the cached
    corpus: tokenized in workers on the first run, loaded from the cache files on the next."""
    corpus = load_corpus(cfg)
    whole_word = whole_word_masking.resolve_whole_word(cfg.masking.whole_word, corpus.sample_texts())
    model, tokenizer, notes = build_model(cfg, corpus.texts)
    hit = corpus.tokenize(tokenizer, whole_word, cfg.nsp, num_proc(cfg))
    say(f"tokenized corpus {'loaded from the datasets cache' if hit else 'written to'} "
        f"{Path(corpus.tokens.cache_files[0]['filename']).parent if corpus.tokens.cache_files else 'memory'}")
    notes["tokens_cached"] = hit
    train = build_examples(cfg, corpus.tokens, corpus.split.train, corpus.split.document, tokenizer, whole_word,
                           cfg.run.seed)
    held = build_examples(cfg, corpus.eval_tokens, corpus.eval_rows, corpus.eval_split.document, tokenizer,
                          whole_word, cfg.eval_seed, cfg.data.max_eval_examples)
    return model, tokenizer, notes, whole_word, train, train, list(held)


def prepare_stream(cfg: Config) -> tuple:
    """prepare_data for data.streaming: the training examples as a datasets IterableDataset read from the file on
    every pass; warm-up examples from its start; held-out ones from data.eval or from rows picked by a hash."""
    fraction = 0.0 if cfg.data.eval else cfg.data.eval_fraction

    def texts():
        rows = enumerate(row["text"].strip() for row in corpus.stream_lines(cfg.data.train))
        return (text for i, text in rows if text and not corpus.held_by_hash(cfg.run.seed, i, fraction))

    whole_word = whole_word_masking.resolve_whole_word(cfg.masking.whole_word, corpus.first_texts_of(texts()))
    model, tokenizer, notes = build_model(cfg, texts)
    settings = (cfg.data.train, tokenizer, whole_word, cfg.data.mode, cfg.data.max_length, cfg.run.seed, fraction)
    train = corpus.streaming_dataset(*settings, cfg.data.shuffle_buffer)
    warmup = corpus.take(corpus.stream_examples(*settings, held=False), cfg.head_warmup_steps * global_batch_size(cfg))
    limit = cfg.data.max_eval_examples
    if cfg.data.eval:  # a separate held-out file goes through the cache like a whole corpus
        tokens, rows = corpus.tokenized_file(cfg.data.eval, tokenizer, whole_word, cfg.data.text_column,
                                             cfg.data.cache_dir, num_proc(cfg))
        held = list(build_examples(cfg, tokens, rows.train, rows.document, tokenizer, whole_word, cfg.eval_seed,
                                   limit))
    else:
        held = corpus.take(corpus.stream_examples(*settings, held=True), limit or sys.maxsize)
    return model, tokenizer, notes, whole_word, train, warmup, held


def global_batch_size(cfg: Config) -> int:
    """Examples per optimizer step over all processes (the head warm-up uses it: the same in any layout)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return (int(cfg.train.get("per_device_train_batch_size", 8)) * world
            * int(cfg.train.get("gradient_accumulation_steps", 1)))


def task_settings(cfg: Config, whole_word: str) -> task.Settings:
    """What `bertkit evaluate` needs to mask held-out text as this run did, saved in the model's config.json."""
    return task.Settings(max_length=cfg.data.max_length, mode=cfg.data.mode, whole_word=whole_word,
                         mlm_probability=cfg.masking.probability, mask_replace_prob=cfg.masking.mask_replace_prob,
                         random_replace_prob=cfg.masking.random_replace_prob, nsp=cfg.nsp, seed=cfg.eval_seed)


def masking_settings(cfg: Config, whole_word: str) -> dict:
    """MaskingCollator's settings for this run: training, the head warm-up and the held-out masks share them."""
    return {"mlm_probability": cfg.masking.probability, "mask_replace_prob": cfg.masking.mask_replace_prob,
            "random_replace_prob": cfg.masking.random_replace_prob, "whole_word": whole_word}


def perplexity_before(cfg: Config, model, tokenizer, notes: dict, warmup_examples, masking: dict, held_out,
                      batch_size: int) -> dict:
    """The held-out perplexity before training (after a new head's warm-up); `head` says what it measures."""
    collator = whole_word_masking.MaskingCollator(tokenizer, **masking, seed=cfg.run.seed)
    before_head = task.warm_up_new_head(model, notes, warmup_examples, collator, cfg.head_warmup_steps,
                                        global_batch_size(cfg), cfg.head_warmup_lr, cfg.run.seed)
    before = task.masked_perplexity(model, held_out, tokenizer.pad_token_id, batch_size)
    before["head"] = before_head
    say(f"held-out perplexity before training: {before['perplexity']:.2f} "
        f"({before['masked_tokens']} masked tokens; {before_head})")
    return before


def collect_results(run, before: dict, after: dict, held_out, train_result, whole_word: str, notes: dict,
                    tokenizer) -> dict:
    """What metrics.json records: the perplexities, the training loss, and what the run did to head and
    vocabulary."""
    return {"eval": {"perplexity": after["perplexity"], "loss": after["loss"],
                     "perplexity_before": before["perplexity"], "perplexity_before_is": before["head"],
                     **({"nsp_accuracy": after["nsp_accuracy"]} if "nsp_accuracy" in after else {})},
            "before": before, "after": after, "held_out_examples": len(held_out),
            "train": {"loss": train_result.training_loss, **train_result.metrics}, "whole_word": whole_word,
            "mlm_head": notes["mlm_head"], "new_tokens": notes.get("new_tokens", []),
            "tokens_cached": notes.get("tokens_cached"),
            "vocab_size": len(tokenizer), "wall_time_s": round(time.perf_counter() - run.started, 1)}


def summary_rows(cfg: Config, results: dict) -> dict:
    """The closing table: perplexity before and after, and what was measured how."""
    before, after = results["before"], results["after"]
    return {"perplexity before": before["perplexity"], "perplexity after": after["perplexity"],
            "masked tokens": after["masked_tokens"], "before measured": before["head"],
            **({"NSP accuracy": after["nsp_accuracy"]} if cfg.nsp else {}),
            "MLM head": results["mlm_head"], "new tokens": len(results["new_tokens"]),
            "whole-word masking": results["whole_word"], "train loss": results["train"]["loss"],
            "wall time (s)": results["wall_time_s"]}


def pretraining_arguments(cfg: Config):
    """TrainingArguments of the run: the held-out loss picks the best checkpoint; loss only, and the columns the
    masking collator reads kept (word_ids, example_id: the collator drops both)."""
    train_args = {"prediction_loss_only": True, **cfg.train, "remove_unused_columns": False}
    return training.training_arguments(train_args, cfg.run.output_dir, cfg.run.precision, cfg.run.seed, True, "loss",
                                       greater_is_better=False)


def say_examples(cfg: Config, train_examples, eval_examples, whole_word: str) -> None:
    """A line on what the run trains and scores on."""
    count = "streamed" if cfg.data.streaming else len(train_examples)
    say(f"{count} train / {len(eval_examples)} held-out examples "
        f"({'NSP pairs' if cfg.nsp else cfg.data.mode + ' mode'}, max {cfg.data.max_length} tokens); "
        f"whole-word masking: {whole_word}")


def main(cfg: Config) -> dict:
    run = training.start_run(cfg, "mlm")  # seed; hold output_dir (an old run there is refused unless overwrite=true)
    prepare = prepare_stream if cfg.data.streaming else prepare_data
    model, tokenizer, notes, whole_word, train_examples, warmup_examples, eval_examples = prepare(cfg)
    say_examples(cfg, train_examples, eval_examples, whole_word)
    masking = masking_settings(cfg, whole_word)
    collator = whole_word_masking.MaskingCollator(tokenizer, **masking, seed=cfg.eval_seed)
    held_out = whole_word_masking.mask_once(eval_examples, collator)
    args = pretraining_arguments(cfg)
    model.config.sparse_prediction = True  # train and evaluate on the masked positions only: (M, V) logits
    model.to(args.device)
    batch_size = args.per_device_eval_batch_size
    before = perplexity_before(cfg, model, tokenizer, notes, warmup_examples, masking, held_out, batch_size)

    # Training masks: per example, from (seed, epoch, example_id = row index); the callback advances the epoch.
    train_masking = whole_word_masking.MaskingCollator(tokenizer, **masking, seed=cfg.run.seed)
    trainer = training.FineTuningTrainer(
        model=model, args=args, train_dataset=train_examples, eval_dataset=datasets.Dataset.from_list(held_out),
        processing_class=tokenizer, data_collator=whole_word_masking.PretrainingCollator(train_masking),
        callbacks=[whole_word_masking.MaskingEpochCallback(train_masking), *training.early_stopping(cfg, True)],
        llrd=cfg.tune.llrd, head_lr=cfg.tune.head_lr)
    with run.training(trainer) as checkpoint:  # the replaced run cleared now; a full disk is one line
        train_result = trainer.train(resume_from_checkpoint=checkpoint)
    after = task.masked_perplexity(trainer.model, held_out, tokenizer.pad_token_id, batch_size)

    results = collect_results(run, before, after, held_out, train_result, whole_word, notes, tokenizer)
    vocab = {"vocab.txt": lambda path: vocabulary.write_vocab_txt(tokenizer, path)} if notes.get("scratch") else None
    trainer.model.config.bertkit_task_settings = settings_dict(task_settings(cfg, whole_word))  # for evaluate
    with run.saving(trainer):  # the completion record removed first, written last (rank 0)
        trainer.save_model(str(run.output_dir))  # every process: collective under DDP / FSDP / DeepSpeed
        run.save_files(trainer, results, None, vocab)  # metrics.json, curve, config, card; vocab.txt of a scratch run
    training.report(cfg, "mlm", "mlm: held-out perplexity (fixed masks)", summary_rows(cfg, results), run.output_dir)
    return results
