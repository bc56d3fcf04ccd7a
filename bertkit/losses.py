"""Losses that stay exact under gradient accumulation, for the heads in `modeling_bert.py`.

Trainer passes `num_items_in_batch` (the count of labels != -100 over all micro-batches of one optimizer step) to a
forward that takes **kwargs, and then no longer divides the loss by the accumulation steps. Summing here and dividing
by that count makes 8 x 1 and 2 x 4 give the same update (docs/notes.md: transformers issue 47688).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def normalise(loss_sum: torch.Tensor, local_count, num_items_in_batch) -> torch.Tensor:
    """A summed loss divided by the step's item count when Trainer gives it, else by this batch's."""
    denominator = num_items_in_batch if num_items_in_batch is not None else local_count
    if torch.is_tensor(denominator):
        denominator = denominator.to(loss_sum.device)
    return loss_sum / denominator


def token_cross_entropy(logits, labels, num_items_in_batch=None) -> torch.Tensor:
    """Cross-entropy over labelled positions. logits (..., C), labels (...) with -100 = ignore."""
    logits, labels = logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1).to(logits.device)
    loss_sum = F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, reduction="sum")
    return normalise(loss_sum, labels.ne(IGNORE_INDEX).sum().clamp(min=1), num_items_in_batch)


def sequence_loss(logits, labels, problem_type: str, num_items_in_batch=None) -> torch.Tensor:
    """Single-label CE, multi-label BCE or regression MSE, each as a mean over items (or over the whole step)."""
    logits = logits.float()
    if problem_type == "regression":
        labels = labels.to(logits.dtype).view(logits.shape)
        loss_sum = F.mse_loss(logits, labels, reduction="sum")
        return normalise(loss_sum, labels.numel(), num_items_in_batch)
    if problem_type == "multi_label_classification":
        labels = labels.to(logits.dtype)
        loss_sum = F.binary_cross_entropy_with_logits(logits, labels, reduction="sum")
        return normalise(loss_sum, labels.numel(), num_items_in_batch)
    return token_cross_entropy(logits, labels, num_items_in_batch)


class ClassWeightedLoss:
    """Trainer's `compute_loss_func` for class weights (`class_weights`, bertkit/tasks/classify.py): single-label
    cross-entropy with a weight per class, or multi-label BCE with a positive weight per label. Trainer pops the
    labels, runs the model without them and calls this with the step's `num_items_in_batch`; the weighted sum over
    that count keeps gradient accumulation exact, as `sequence_loss` does. Works for every family's model (it only
    reads `outputs.logits`)."""

    def __init__(self, weights: list[float], multi_label: bool):
        self.weights, self.multi_label = torch.tensor(weights, dtype=torch.float32), multi_label

    def __call__(self, outputs, labels, num_items_in_batch=None) -> torch.Tensor:
        logits = (outputs["logits"] if isinstance(outputs, dict) else outputs[0]).float()
        weights = self.weights.to(logits.device)
        if self.multi_label:
            labels = labels.to(logits.dtype).view(logits.shape)
            loss_sum = F.binary_cross_entropy_with_logits(logits, labels, pos_weight=weights, reduction="sum")
            return normalise(loss_sum, labels.numel(), num_items_in_batch)
        labels = labels.reshape(-1).to(logits.device)
        loss_sum = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels, weight=weights,
                                   ignore_index=IGNORE_INDEX, reduction="sum")
        return normalise(loss_sum, labels.ne(IGNORE_INDEX).sum().clamp(min=1), num_items_in_batch)


def infer_problem_type(config, labels) -> str:
    """transformers' rule: 1 label -> regression; integer labels -> single-label; float multi-hot -> multi-label."""
    if config.problem_type is not None:
        return config.problem_type
    if config.num_labels == 1:
        return "regression"
    if labels.dtype in (torch.long, torch.int):
        return "single_label_classification"
    return "multi_label_classification"


__all__ = ["IGNORE_INDEX", "normalise", "token_cross_entropy", "sequence_loss", "ClassWeightedLoss",
           "infer_problem_type"]
