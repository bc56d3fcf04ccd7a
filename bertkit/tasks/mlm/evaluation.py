"""Held-out masked-LM evaluation: perplexity over fixed masks, scoring the labelled positions only."""

from __future__ import annotations

import collections
import math
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from transformers.modeling_outputs import MaskedLMOutput
from transformers.models.bert.modeling_bert import BertForPreTrainingOutput

from bertkit.errors import BertkitError
from bertkit.tasks.mlm.masking import IGNORE_INDEX, pad_masked


def masked_lm_sums(model, batch: dict[str, torch.Tensor]) -> dict[str, float | int]:
    """Summed masked-LM negative log-likelihood over the labelled positions of a padded batch, their count, and
    (with next-sentence labels and an NSP head) the correct NSP predictions. The model's own forward with sparse
    prediction: only the labelled positions reach the vocabulary projection, (M, V) instead of (B, T, V)."""
    selected = batch["labels"].ne(IGNORE_INDEX)  # (B, T)
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


__all__ = ["masked_lm_sums", "masked_perplexity"]
