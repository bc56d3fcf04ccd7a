"""Masked-LM pretraining: the mlm task (continued domain pretraining, whole-word masking, held-out perplexity).

This module is the task's interface (read, encode, metrics, settings, predict, evaluate) and what serves a trained
model: the Settings a run saves with its model, masked-token accuracy and perplexity of eval predictions, held-out
perplexity over fixed masks, loading with an MLM head (and a new head's warm-up), and the fill-mask predictor.
The rest of the task lives beside it:

    corpus.py              the corpus through `datasets` (read, split, tokenize in workers, cached; why a read
                           failed, in one line), group blocks / line windows / NSP pairs read on demand from the
                           cached tokens, the same rows from a streamed corpus or from in-memory lists
    whole_word_masking.py  word ids for whole-word masking (## pieces, rjieba words, the auto mode) and
                           MaskingCollator (BERT's 15 % with 80/10/10, token or whole-word; masks a function of
                           seed/epoch/example), fixed held-out masks
    vocabulary.py          domain words added to a tokenizer and model; from-scratch WordPiece and config
"""

from __future__ import annotations

import collections
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers.modeling_outputs import MaskedLMOutput
from transformers.models.bert.modeling_bert import BertForPreTrainingOutput

from bertkit.tasks import reporting, serving
from bertkit.checkpoints import NO_HUB_KERNELS, for_inference, load_tokenizer
from bertkit.console import say, warn
from bertkit.errors import BertkitError
from bertkit.families import implementation_for, is_bertkit, takes_token_types
from bertkit.report_html import SHOWN_EXAMPLES, esc, fmt, missing, section, table
from bertkit.rundir import atomic_output, check_output_path, read_config_json, write_json
from bertkit.tasks import SETTINGS_KEY, no_confidence_cut, read_settings
from bertkit.tasks.mlm.corpus import encode, read_examples
from bertkit.tasks.mlm.whole_word_masking import (IGNORE_INDEX, MaskingCollator, mask_once, pad_masked,
                                                  resolve_whole_word, with_example_ids)


# ==================================================================================================== settings
# What an mlm run saves beside its model so that `bertkit evaluate` masks held-out text the way the run did:
# written by recipes/mlm.py into config.json under tasks.SETTINGS_KEY, read back by load_predictor.

@dataclass
class Settings:
    max_length: int = 128
    """Tokens per example, [CLS] and [SEP] included (the run's data.max_length)."""
    mode: Literal["line", "group"] = "group"
    """line: an example per paragraph (long ones windowed); group: all text concatenated, cut into blocks."""
    whole_word: Literal["auto", "none", "wordpiece", "chinese"] = "auto"
    """Whole-word masking the run used; auto (no run to say) = chinese for a mostly-CJK text, else wordpiece."""
    mlm_probability: float = 0.15
    """Share of tokens selected for prediction (the run's masking.probability)."""
    mask_replace_prob: float = 0.8
    """Of the selected tokens: share replaced by [MASK]."""
    random_replace_prob: float = 0.1
    """Of the selected tokens: share replaced by a random token (the rest stay unchanged)."""
    nsp: bool = False
    """The model also predicts the next sentence: examples are sentence pairs, NSP accuracy is reported."""
    seed: int = 1234
    """Seed of the fixed held-out masks (the run's eval_seed): the same seed masks the same positions."""

    def check(self) -> None:
        """Raise a one-line BertkitError naming the key when a saved value cannot work."""
        shortest = 5 if self.nsp else 3  # [CLS] A [SEP] B [SEP] / [CLS] token [SEP]
        if self.max_length < shortest:
            raise BertkitError(f"{SETTINGS_KEY}.max_length={self.max_length} must be at least {shortest}")
        for key in ("mlm_probability", "mask_replace_prob", "random_replace_prob"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise BertkitError(f"{SETTINGS_KEY}.{key}={getattr(self, key)} must be in [0, 1]")
        if self.mask_replace_prob + self.random_replace_prob > 1.0 + 1e-9:
            raise BertkitError(f"{SETTINGS_KEY}.mask_replace_prob + random_replace_prob must be at most 1, got "
                               f"{self.mask_replace_prob} + {self.random_replace_prob}")


# ===================================================================================================== metrics
# Masked-token accuracy and perplexity from evaluation predictions, scored at the labelled positions only.

CHUNK_ROWS = 1024  # positions whose log-softmax is computed at once (float64 over the vocabulary)


def masked_token_scores(logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Accuracy, mean negative log-likelihood (loss) and perplexity over the labelled positions. `logits` are the
    full (B, T, V) with `labels` (B, T), or a sparse head's (M, V) for the M labelled positions in row order."""
    labels = np.asarray(labels)
    chosen = labels != IGNORE_INDEX  # (B, T)
    targets = labels[chosen]  # (M,)
    logits = np.asarray(logits)
    logits = logits[chosen] if logits.ndim == 3 else logits  # (M, V)
    if len(targets) == 0:
        raise BertkitError("the evaluation set has no masked token — give it more text")
    nll, right = 0.0, 0
    for start in range(0, len(targets), CHUNK_ROWS):
        rows = logits[start:start + CHUNK_ROWS].astype(np.float64)  # (C, V)
        gold = targets[start:start + CHUNK_ROWS]  # (C,)
        top = rows.max(-1, keepdims=True)  # (C, 1)
        log_norm = top[:, 0] + np.log(np.exp(rows - top).sum(-1))  # (C,)
        nll += float((log_norm - rows[np.arange(len(gold)), gold]).sum())
        right += int((rows.argmax(-1) == gold).sum())
    loss = nll / len(targets)
    return {"accuracy": right / len(targets), "loss": loss, "perplexity": math.exp(min(loss, 700.0))}


def compute_metrics_fn():
    """The Trainer's compute_metrics for a masked LM: `masked_token_scores` of the MLM logits (the first of a
    pre-training model's two outputs) against the labels."""
    def compute_metrics(eval_pred) -> dict[str, float]:
        logits, labels = eval_pred.predictions, eval_pred.label_ids
        logits = logits[0] if isinstance(logits, (tuple, list)) else logits
        labels = labels[0] if isinstance(labels, (tuple, list)) else labels
        return masked_token_scores(logits, labels)
    return compute_metrics


# ========================================================================================= held-out perplexity
# Held-out masked-LM evaluation: perplexity over fixed masks, scoring the labelled positions only.

def masked_lm_sums(model, batch: dict[str, torch.Tensor]) -> dict[str, float | int]:
    """Summed masked-LM negative log-likelihood over the labelled positions of a padded batch, their count, and
    (with next-sentence labels and an NSP head) the correct NSP predictions. The model's own forward with sparse
    prediction: only the labelled positions reach the vocabulary projection, (M, V) instead of (B, T, V)."""
    selected = batch["labels"].ne(IGNORE_INDEX)  # (B, T)
    if not is_bertkit(model):  # transformers' masked LM of another family: full logits, then the labelled positions
        out = model(**encoder_inputs(model, batch))
        logits = out.logits[selected]  # (B, T, V) -> (M, V)
    else:
        out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["labels"],
                    sparse_prediction=True)
        logits = out.logits if isinstance(out, MaskedLMOutput) else out.prediction_logits  # (M, V)
    sums = {"nll": F.cross_entropy(logits.float(), batch["labels"][selected], reduction="sum").item(),
            "count": int(selected.sum()), "nsp_right": 0, "nsp_total": 0}
    if "next_sentence_label" in batch and isinstance(out, BertForPreTrainingOutput):
        predicted = out.seq_relationship_logits.argmax(-1)  # (B,)
        sums["nsp_right"] = int((predicted == batch["next_sentence_label"]).sum())
        sums["nsp_total"] = len(predicted)
    return sums


@torch.no_grad()
def masked_perplexity(model, masked: Sequence[dict[str, Any]], pad_token_id: int, batch_size: int = 16) -> dict:
    """exp(mean negative log-likelihood over all masked tokens) of a BertkitForMaskedLM / BertkitForPreTraining
    on pre-masked features: weighted by tokens, not by batches. With next-sentence labels, also NSP accuracy."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    totals = collections.Counter()
    for start in range(0, len(masked), batch_size):
        batch = {k: v.to(device) for k, v in pad_masked(masked[start:start + batch_size], pad_token_id).items()}
        totals.update(masked_lm_sums(model, batch))
    model.train(was_training)
    if totals["count"] == 0:
        raise BertkitError("the held-out set has no masked token — give it more text (data.eval, data.eval_fraction)")
    loss = totals["nll"] / totals["count"]
    result = {"perplexity": math.exp(min(loss, 700.0)), "loss": loss, "masked_tokens": totals["count"]}
    if totals["nsp_total"]:
        result["nsp_accuracy"] = totals["nsp_right"] / totals["nsp_total"]
    return result


# ================================================================================================ the MLM head
# The masked-LM head: a checkpoint loaded with one (a fresh head, tied to the word embeddings, when it has none),
# and a new head's warm-up with the encoder frozen, so the "before" perplexity is the pretrained encoder's.

# ---------------------------------------------------------------------------------------- loading the model


def load_mlm_model(path: str, nsp: bool = False):
    """A checkpoint as `BertkitForMaskedLM` (or `BertkitForPreTraining` with nsp) and what was new in it.

    A checkpoint without an MLM head (a sentence-embedding model such as MiniLM) gets a fresh one: transform
    initialised as in BERT, bias zero, decoder tied to the word embeddings. A checkpoint's pooler, which the MLM
    head never uses, is carried along unchanged (no gradient reaches it), so a classifier fine-tuned from the
    output starts from the same pooler as one fine-tuned from the original checkpoint."""
    from bertkit import BertkitForMaskedLM, BertkitForPreTraining, BertkitModel

    from bertkit.checkpoints import check_encoder_loaded
    from bertkit.console import quiet_load_report

    config_file = Path(path) / "config.json"
    config = read_config_json(config_file) if config_file.is_file() else transformers.AutoConfig.from_pretrained(path)
    if implementation_for(config, path) != "bertkit":  # what is not an encoder bertkit knows is refused here
        return load_family_mlm(path, nsp)
    model_class = BertkitForPreTraining if nsp else BertkitForMaskedLM
    with quiet_load_report():  # the report says what is new (the caller prints it): transformers' table to train.log
        model, info = model_class.from_pretrained(path, output_loading_info=True, **NO_HUB_KERNELS)
    check_encoder_loaded(info, path, model)  # a missing encoder weight stops the run: it would start random
    missing = sorted(info["missing_keys"])
    report = {"new_mlm_keys": [k for k in missing if k.startswith("cls.predictions.")],
              "new_nsp_keys": [k for k in missing if k.startswith("cls.seq_relationship.")],
              "pooler": "none"}
    if nsp:
        report["pooler"] = "new" if any(".pooler." in f".{k}" for k in missing) else "kept"
    elif any(".pooler." in f".{k}" for k in info["unexpected_keys"]):
        with quiet_load_report():
            model.bert.pooler = BertkitModel.from_pretrained(path, **NO_HUB_KERNELS).pooler
        report["pooler"] = "kept"
    report["mlm_head"] = "new" if report["new_mlm_keys"] else "loaded"
    return model, report


def encoder_inputs(model, batch: dict) -> dict:
    """input_ids, attention_mask and (for a model that has them) token_type_ids of a batch."""
    keys = ["input_ids", "attention_mask"] + (["token_type_ids"] if "token_type_ids" in batch and
                                              takes_token_types(model) else [])
    return {key: batch[key] for key in keys}


def load_family_mlm(path: str, nsp: bool):
    """A checkpoint of another family than BERT as transformers' AutoModelForMaskedLM, and what was new in it (its
    head, when the checkpoint had none). NSP is BERT's: RoBERTa and the families after it dropped it."""
    from bertkit.checkpoints import check_encoder_loaded
    from bertkit.console import quiet_load_report
    from bertkit.families import family_of

    config = transformers.AutoConfig.from_pretrained(path)
    if nsp:
        raise BertkitError(f"nsp=true trains BERT's next-sentence head, and {path} is a {family_of(config).name} "
                           "checkpoint, which has none — set nsp=false")
    with quiet_load_report():
        model, info = transformers.AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True,
                                                                        **NO_HUB_KERNELS)
    check_encoder_loaded(info, path, model)
    new = sorted(key for key in info["missing_keys"] if not key.startswith(f"{model.base_model_prefix}."))
    return model, {"new_mlm_keys": new, "new_nsp_keys": [], "pooler": "none",
                   "mlm_head": "new" if new else "loaded"}


def say_new_heads(name: str, notes: dict, nsp: bool) -> None:
    """A line for each head the checkpoint lacked (initialised new by load_mlm_model)."""
    if notes["mlm_head"] == "new":
        head = notes["new_mlm_keys"][0].split(".")[0]
        warn(f"{name} has no MLM head ({len(notes['new_mlm_keys'])} {head}.* weights missing): a new head is "
             "initialised, its decoder tied to the word embeddings — consider head_lr (e.g. 1.0e-3) so it catches up")
    if nsp and notes["new_nsp_keys"]:
        say("the checkpoint has no NSP head: a new one is initialised")


def decoder_is_tied(model) -> bool:
    """Whether the MLM decoder is the word embedding matrix itself (tied), as in BERT."""
    return model.get_output_embeddings().weight is model.get_input_embeddings().weight


# ------------------------------------------------------------------------------------------ head warm-up


def new_head_parameters(model) -> list[torch.nn.Parameter]:
    """The head's own parameters (MLM transform and bias, NSP classifier): not the decoder, which is the encoder's
    word embedding matrix (tied)."""
    encoder = {id(p) for p in model.base_model.parameters()}
    return [p for p in model.parameters() if id(p) not in encoder]


def warmup_order(count: int, examples: int, seed: int) -> list[int]:
    """`count` example indices in a seeded random order, passing over the examples again when there are fewer."""
    order: list[int] = []
    for rounds in range(-(-count // max(examples, 1))):
        need = min(examples, count - len(order))
        order += random.Random(f"head-warmup/{seed}/{rounds}").sample(range(examples), need)
    return order


def warm_up_head(model, examples, collator, steps: int, batch_size: int, lr: float, seed: int) -> int:
    """Train a new MLM (and NSP) head for `steps` with the encoder frozen and in eval mode, so that the held-out
    perplexity measured next is that of the pretrained encoder read by a fitted head, not of a random head (about
    50,000 on MiniLM, which any training "lowers"). Eval mode (no dropout), seeded example order and masks (the
    collator's epoch -1, never a training epoch): the same head in any process layout and after a resume. The
    batch size is the run's global one, so one process and several warm up alike. Returns the steps taken."""
    head = new_head_parameters(model)
    frozen = [p for p in model.parameters() if p.requires_grad and all(p is not h for h in head)]
    for p in frozen:
        p.requires_grad_(False)
    was_training, epoch = model.training, collator.epoch
    model.eval()
    collator.epoch = -1
    optimizer = torch.optim.AdamW(head, lr=lr, weight_decay=0.0)
    order = warmup_order(steps * batch_size, len(examples), seed)
    device = next(model.parameters()).device
    try:
        for start in range(0, len(order), batch_size):
            batch = collator([examples[i] for i in order[start:start + batch_size]])
            loss = head_loss(model, {k: v.to(device) for k, v in batch.items()})
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    finally:
        for p in frozen:
            p.requires_grad_(True)
        model.train(was_training)
        collator.epoch = epoch
    return -(-len(order) // batch_size)


def warm_up_new_head(model, notes: dict, examples, collator, steps: int, batch_size: int, lr: float,
                     seed: int) -> str:
    """A new head (no MLM head in the checkpoint) trained alone before the "before" perplexity; what that figure
    is, in words (metrics.json and the summary say it)."""
    if notes.get("scratch"):
        return "random model (from scratch)"
    if notes["mlm_head"] != "new":
        return "pretrained head"
    if steps == 0 or not len(examples):
        return "new random head (head_warmup_steps=0)"
    done = warm_up_head(model, examples, collator, steps, batch_size, lr, seed)
    return f"after {done} head-only steps (encoder frozen, lr {lr:g})"


def head_loss(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Masked-LM loss (plus NSP loss when labelled) through the head only: the encoder runs without a graph
    (bertkit's BERT; another family runs its own forward with the encoder's weights frozen)."""
    if not is_bertkit(model):
        return model(**encoder_inputs(model, batch), labels=batch["labels"]).loss
    with torch.no_grad():
        out = model.bert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    selected = batch["labels"].ne(IGNORE_INDEX)  # (B, T)
    logits = model.cls.predictions(out.last_hidden_state[selected])  # (M, D) -> (M, V)
    loss = torch.nn.functional.cross_entropy(logits.float(), batch["labels"][selected])
    if "next_sentence_label" in batch and hasattr(model.cls, "seq_relationship"):
        nsp = model.cls.seq_relationship(out.pooler_output)  # (B, 2)
        loss = loss + torch.nn.functional.cross_entropy(nsp.float(), batch["next_sentence_label"])
    return loss


# =================================================================================================== fill-mask
# Serving a masked LM: the top tokens for each [MASK] of a text (fill-mask), and the held-out perplexity of a text
# file over masks fixed by the run's seed (what the run reported as its "after" figure for the same text).

TOP_K = 5  # tokens predicted per [MASK]

@dataclass
class FillMaskPredictor:
    """A masked LM ready to serve: its tokenizer, the model in eval mode, and the settings its run saved."""
    tokenizer: Any
    model: Any
    settings: Settings

    @torch.no_grad()
    def top_tokens(self, texts: list[str], top_k: int = TOP_K) -> list[list[list[dict]]]:
        """Per text, per [MASK] in it (left to right), the top_k tokens and their probabilities."""
        enc = self.tokenizer(texts, truncation=True, max_length=self.settings.max_length, padding=True,
                             return_tensors="pt")
        device = next(self.model.parameters()).device
        at_mask = enc["input_ids"].eq(self.tokenizer.mask_token_id)  # (B, T)
        if not is_bertkit(self.model):
            logits = self.model(**encoder_inputs(self.model, enc.to(device))).logits[at_mask.to(device)]  # (M, V)
            return self._top(texts, at_mask, logits, top_k)
        out = self.model.bert(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device),
                              token_type_ids=enc["token_type_ids"].to(device) if "token_type_ids" in enc else None)
        logits = self.model.cls.predictions(out.last_hidden_state[at_mask.to(device)])  # (M, D) -> (M, V)
        return self._top(texts, at_mask, logits, top_k)

    def _top(self, texts: list[str], at_mask: torch.Tensor, logits: torch.Tensor, top_k: int) -> list:
        scores, ids = logits.float().softmax(-1).topk(top_k, dim=-1)  # (M, k) each
        rows = at_mask.nonzero()[:, 0].tolist()  # (M,) the text of each mask
        result: list[list[list[dict]]] = [[] for _ in texts]
        for row, row_ids, row_scores in zip(rows, ids.tolist(), scores.tolist()):
            tokens = self.tokenizer.convert_ids_to_tokens(row_ids)
            result[row].append([{"token": t, "id": i, "score": s} for t, i, s in zip(tokens, row_ids, row_scores)])
        return result


def load_predictor(model_dir: str) -> FillMaskPredictor:
    """A trained mlm run (or any checkpoint with an MLM head) with the settings saved in its config.json."""
    config = transformers.AutoConfig.from_pretrained(model_dir)
    settings = read_settings(Settings, config, str(Path(model_dir) / "config.json"))
    model, report = load_mlm_model(model_dir, nsp=settings.nsp)
    if report["mlm_head"] == "new":
        head = report["new_mlm_keys"][0].split(".")[0]
        raise BertkitError(f"{model_dir} has no MLM head ({head}.* weights): its predictions would come from a random "
                           "head — use the output directory of `bertkit run mlm`")
    return FillMaskPredictor(load_tokenizer(model_dir), for_inference(model), settings)


def read_masked_lines(path: str, mask_token: str) -> list[str]:
    """The lines of a text file that hold the mask token (others have nothing to fill)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if mask_token in line]


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 64,
                 min_confidence: float | None = None) -> int:
    """Fill-mask over a text file: for each line holding [MASK], one JSON line with the text and, per [MASK], the
    TOP_K tokens with their probabilities. Returns the lines written."""
    no_confidence_cut(min_confidence, "mlm")
    output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir])
    predictor = load_predictor(model_dir)
    texts = read_masked_lines(input_path, predictor.tokenizer.mask_token)
    if not texts:
        raise BertkitError(f"{input_path}: no line holds {predictor.tokenizer.mask_token} — nothing to fill")
    with atomic_output(output_path, "predictions") as handle:  # creates a missing folder, saying so
        for start in range(0, len(texts), batch_size):
            batch = texts[start:start + batch_size]
            for text, masks in zip(batch, predictor.top_tokens(batch, TOP_K)):
                handle.write(json.dumps({"text": text, "masks": masks}, ensure_ascii=False) + "\n")
    return len(texts)


def evaluate_file(model_dir: str, input_path: str, output_path: str | None = None, batch_size: int = 64) -> dict:
    """Held-out perplexity of the model on a corpus file (read as the recipe reads data.eval: group blocks or line
    windows as the run made them), each example masked once from (seed, its number), as the run's held-out set
    was. NSP pairs are drawn from one seeded stream, not the training pipeline's per-pair draws."""
    if output_path:
        output_path = check_output_path(output_path, inputs=[input_path], model_dirs=[model_dir], what="metrics")
    predictor = load_predictor(model_dir)
    settings, tokenizer = predictor.settings, predictor.tokenizer
    documents = read_examples(input_path)
    whole_word = resolve_whole_word(settings.whole_word, [paragraph for doc in documents for paragraph in doc])
    rows = encode(tokenizer, documents, settings.max_length, settings.mode, whole_word, settings.nsp, settings.seed)
    collator = MaskingCollator(tokenizer, settings.mlm_probability, settings.mask_replace_prob,
                               settings.random_replace_prob, whole_word, seed=settings.seed)
    held_out = mask_once(with_example_ids(rows), collator)
    result = {**masked_perplexity(predictor.model, held_out, tokenizer.pad_token_id, batch_size),
              "examples": len(held_out), "whole_word": whole_word}
    if output_path:
        write_json(Path(output_path), result)
    return result


# ================================================================================================ serving


class Endpoint(serving.Endpoint):
    """Texts holding the mask token in; per mask, the likeliest tokens with their probabilities out."""

    name = "mlm"

    def __init__(self, run_dir: str):
        self.predictor = predictor = load_predictor(run_dir)
        self.mask, self.top_k = predictor.tokenizer.mask_token, TOP_K
        self.count = serving.token_counter(predictor.tokenizer, predictor.settings.max_length)
        self.info = {"mask_token": self.mask, "top_k": TOP_K, "max_length": predictor.settings.max_length}

    def parse(self, inputs) -> list:
        texts = [serving.text(value, f"inputs[{i}]") for i, value in enumerate(serving.items(inputs))]
        for i, text in enumerate(texts):
            if self.mask not in text:
                raise serving.InputError(f"inputs[{i}] holds no {self.mask}: nothing to fill")
        return texts

    def chars(self, text: str) -> int:
        return len(text)

    def tokens(self, texts: list) -> list[int]:
        return self.count(texts)

    def predict(self, texts: list) -> list[dict]:
        return [{"text": text, "masks": masks} for text, masks in zip(texts, self.predictor.top_tokens(texts,
                                                                                                        self.top_k))]


# ------------------------------------------------------------------------------------------------ its report


class Report(reporting.Report):
    """The mlm part of report.html: held-out perplexity before and after training, and fill-mask examples."""

    default_metric = "perplexity"

    @staticmethod
    def perplexity_before(view) -> float | None:
        """The held-out perplexity of the model before training (the mlm recipe's metrics.json:
        eval.perplexity_before, and before.perplexity)."""
        before = view.eval.get("perplexity_before", (view.metrics.get("before") or {}).get("perplexity"))
        return before if isinstance(before, (int, float)) else None

    def answer_lines(self, view) -> list[str]:
        before = self.perplexity_before(view)
        return [] if before is None else [f"held-out perplexity before training {fmt(before)}"]

    def examples(self, view) -> dict:
        """A few held-out lines with one word (the longest) hidden, and the model's top tokens for it."""
        why = reporting.cannot_run_on_dev(view)
        if why:
            return {"why": why}
        predictor = load_predictor(str(view.path))
        mask = predictor.tokenizer.mask_token
        lines = [line.strip() for line in Path(view.dev_file).read_text(encoding="utf-8").splitlines()
                 if line.strip()]
        chosen = []
        for line in lines[:SHOWN_EXAMPLES]:
            words = line.split()
            if len(words) >= 3:
                word = max(words[: 40], key=len)
                chosen.append((line.replace(word, mask, 1), word))
            elif len(line) >= 4:  # Chinese: no spaces, hide one character in the middle
                middle = min(len(line) // 2, 60)
                chosen.append((line[:middle] + mask + line[middle + 1:], line[middle]))
        if not chosen:
            return {"why": "no held-out line long enough to mask"}
        tops = predictor.top_tokens([text[:400] for text, _ in chosen])
        rows = [{"masked": text[:400], "word": word,
                 "top": [(t["token"], t["score"]) for t in top[0]] if top else []}
                for (text, word), top in zip(chosen, tops)]
        return {"mlm": rows, "keys": [r["masked"] for r in rows],
                "predicted": [r["top"][0][0] if r["top"] else "" for r in rows]}

    def sections(self, view, examples: dict, diagnosis) -> str:
        before, after = self.perplexity_before(view), view.eval.get("perplexity")
        if isinstance(after, (int, float)):
            rows = [["before training", before], ["after training", after]] if before is not None else \
                [["after training", after]]
            body = table(["held-out perplexity", "value"], rows)
        else:
            body = missing("no perplexity in metrics.json")
        fills = examples.get("mlm")
        if fills:
            items = "".join(f'<div class="ex">{esc(f["masked"])}<br><span class="note">hidden: {esc(f["word"])} · '
                            f'model: {esc(", ".join(f"{t} ({p:.2f})" for t, p in f["top"]))}</span></div>'
                            for f in fills[:SHOWN_EXAMPLES])
        else:
            items = missing(examples.get("why") or "no fill-mask examples")
        return section("Perplexity", body, 3) + section("Fill-mask examples", items, 3)



__all__ = ["read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file",
           "evaluate_file", "FillMaskPredictor", "TOP_K", "read_masked_lines", "masked_token_scores",
           "masked_lm_sums", "masked_perplexity", "decoder_is_tied", "head_loss", "load_mlm_model",
           "new_head_parameters", "say_new_heads", "warm_up_head", "warm_up_new_head", "warmup_order", "Endpoint",
           "Report"]
