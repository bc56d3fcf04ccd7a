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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Literal

import datasets
import transformers

from bertkit import checkpoints, checks, options, training
from bertkit.config import INLINE
from bertkit.console import say
from bertkit.errors import BertkitError
from bertkit.tasks import mlm as task
from bertkit.tasks import settings_dict
from bertkit.tasks.mlm import corpus, vocabulary, whole_word_masking


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
    model: str = checkpoints.DEFAULT_MODEL
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
            scratch = vocabulary.scratch_size(self.model)  # an unknown scratch:<size> is an error naming the sizes
        checks.check_recipe(self, has_eval=True, model=scratch is None)  # the held-out slice is always evaluated
        if training.several_trainings(self):  # FineTuning gives mlm the keys; its trainer builds one model only
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
