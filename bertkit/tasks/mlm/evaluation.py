"""Held-out masked-LM evaluation: perplexity over fixed masks, and a Trainer whose eval loss scores the labelled
positions only."""

from __future__ import annotations

import collections
import math
from typing import Any, Sequence

import torch
import transformers

from bertkit.errors import BertkitError
from bertkit.tasks.mlm.masking import IGNORE_INDEX, pad_masked


def masked_lm_sums(model, batch: dict[str, torch.Tensor]) -> dict[str, float | int]:
    """Summed masked-LM negative log-likelihood over the labelled positions of a padded batch, their count, and
    (with next-sentence labels and an NSP head) the correct NSP predictions. Only the labelled positions reach the
    vocabulary projection: the model's own eval mode would score every position, (B, T, V)."""
    out = model.bert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    selected = batch["labels"].ne(IGNORE_INDEX)  # (B, T)
    logits = model.cls.predictions(out.last_hidden_state[selected]).float()  # (M, D) -> (M, V)
    sums = {"nll": torch.nn.functional.cross_entropy(logits, batch["labels"][selected], reduction="sum").item(),
            "count": int(selected.sum()), "nsp_right": 0, "nsp_total": 0}
    if "next_sentence_label" in batch and hasattr(model.cls, "seq_relationship"):
        predicted = model.cls.seq_relationship(out.pooler_output).argmax(-1)  # (B,)
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


class MaskedEvalTrainer(transformers.Trainer):
    """A Trainer whose evaluation loss is the masked-LM loss over the labelled positions only (see
    `masked_lm_sums`): the same number the training loss estimates, at a fraction of the cost and memory of the
    model's (B, T, V) eval-mode logits. Training is untouched."""

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad(), self.autocast_smart_context_manager():
            sums = masked_lm_sums(self.accelerator.unwrap_model(model), inputs)
        loss = torch.tensor(sums["nll"] / max(sums["count"], 1), device=inputs["input_ids"].device)
        return loss, None, None


__all__ = ["masked_lm_sums", "masked_perplexity", "MaskedEvalTrainer"]
