"""The masked-LM head: a checkpoint loaded with one (a fresh head, tied to the word embeddings, when it has none),
and a new head's warm-up with the encoder frozen, so the "before" perplexity is the pretrained encoder's."""

from __future__ import annotations

import random

import torch

from bertkit.console import say, warn
from bertkit.tasks.mlm.masking import IGNORE_INDEX

# ---------------------------------------------------------------------------------------- loading the model


def load_mlm_model(path: str, nsp: bool = False):
    """A checkpoint as `BertkitForMaskedLM` (or `BertkitForPreTraining` with nsp) and what was new in it.

    A checkpoint without an MLM head (a sentence-embedding model such as MiniLM) gets a fresh one: transform
    initialised as in BERT, bias zero, decoder tied to the word embeddings. A checkpoint's pooler, which the MLM
    head never uses, is carried along unchanged (no gradient reaches it), so a classifier fine-tuned from the
    output starts from the same pooler as one fine-tuned from the original checkpoint."""
    from bertkit import BertkitForMaskedLM, BertkitForPreTraining, BertkitModel

    from bertkit.checkpoints import check_encoder_loaded, check_implementation
    from bertkit.console import quiet_load_report

    check_implementation(path)  # an mlm run of another architecture (predict / evaluate) is refused, not loaded
    model_class = BertkitForPreTraining if nsp else BertkitForMaskedLM
    with quiet_load_report():  # the report says what is new (the caller prints it): transformers' table to train.log
        model, info = model_class.from_pretrained(path, output_loading_info=True)
    check_encoder_loaded(info, path, model.config)  # a missing encoder weight stops the run: it would start random
    missing = sorted(info["missing_keys"])
    report = {"new_mlm_keys": [k for k in missing if k.startswith("cls.predictions.")],
              "new_nsp_keys": [k for k in missing if k.startswith("cls.seq_relationship.")],
              "pooler": "none"}
    if nsp:
        report["pooler"] = "new" if any(".pooler." in f".{k}" for k in missing) else "kept"
    elif any(".pooler." in f".{k}" for k in info["unexpected_keys"]):
        with quiet_load_report():
            model.bert.pooler = BertkitModel.from_pretrained(path).pooler
        report["pooler"] = "kept"
    report["mlm_head"] = "new" if report["new_mlm_keys"] else "loaded"
    return model, report


def say_new_heads(name: str, notes: dict, nsp: bool) -> None:
    """A line for each head the checkpoint lacked (initialised new by load_mlm_model)."""
    if notes["mlm_head"] == "new":
        warn(f"{name} has no MLM head ({len(notes['new_mlm_keys'])} "
             "cls.predictions.* weights missing): a new head is initialised, its decoder tied to the word "
             "embeddings — consider head_lr (e.g. 1.0e-3) so it catches up")
    if nsp and notes["new_nsp_keys"]:
        say("the checkpoint has no NSP head: a new one is initialised")


def decoder_is_tied(model) -> bool:
    """Whether the MLM decoder is the word embedding matrix itself (tied), as in BERT."""
    return model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


# ------------------------------------------------------------------------------------------ head warm-up


def new_head_parameters(model) -> list[torch.nn.Parameter]:
    """The head's own parameters (MLM transform and bias, NSP classifier): not the decoder, which is the encoder's
    word embedding matrix (tied)."""
    encoder = {id(p) for p in model.bert.parameters()}
    return [p for p in model.cls.parameters() if id(p) not in encoder]


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
    """Masked-LM loss (plus NSP loss when labelled) through the head only: the encoder runs without a graph."""
    with torch.no_grad():
        out = model.bert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    selected = batch["labels"].ne(IGNORE_INDEX)  # (B, T)
    logits = model.cls.predictions(out.last_hidden_state[selected])  # (M, D) -> (M, V)
    loss = torch.nn.functional.cross_entropy(logits.float(), batch["labels"][selected])
    if "next_sentence_label" in batch and hasattr(model.cls, "seq_relationship"):
        nsp = model.cls.seq_relationship(out.pooler_output)  # (B, 2)
        loss = loss + torch.nn.functional.cross_entropy(nsp.float(), batch["next_sentence_label"])
    return loss


__all__ = ["decoder_is_tied", "head_loss", "load_mlm_model", "new_head_parameters", "say_new_heads", "warm_up_head",
           "warm_up_new_head", "warmup_order"]
