"""long_doc.aggregate=attention: documents, not windows, are the rows. Training batches flatten the windows of their
documents into one encoder batch (DocumentCollator); predict / evaluate encode windows in token-budget batches under
no_grad and pool each document's window vectors afterwards (`document_logits`), so a long document never needs all
its windows in one encoder call. The model is bertkit.modeling_document.BertkitForDocumentClassification.

Memory: per_device_train_batch_size counts documents, and each keeps at most long_doc.max_windows windows
(ATTENTION_MAX_WINDOWS = 16 when null): one training step runs up to batch x that many windows of max_length tokens
through the encoder with their activations kept, e.g. 16 x 16 x 128 tokens = 32k tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from bertkit.inference import token_budget_batches
from bertkit.modeling_document import BertkitForDocumentClassification

from .long_docs import LongDocConfig


def uses_attention(long_doc: LongDocConfig) -> bool:
    """Whether documents are rows of windows pooled by the model (chunk windows, aggregate=attention)."""
    return long_doc.strategy == "chunk" and long_doc.aggregate == "attention"


@dataclass
class DocumentCollator:
    """Document rows (input_ids / token_type_ids: lists of windows) -> one batch: every window of the batch's
    documents flattened and padded, `document_ids` (W,) = each window's document 0..D-1, labels stacked (D,)|(D, C)."""
    tokenizer: Any

    def __call__(self, features: list[dict]) -> dict:
        windows = [{"input_ids": ids, "token_type_ids": types} for feature in features
                   for ids, types in zip(feature["input_ids"], feature["token_type_ids"])]
        batch = dict(self.tokenizer.pad(windows, return_tensors="pt"))
        counts = torch.tensor([len(feature["input_ids"]) for feature in features])
        batch["document_ids"] = torch.repeat_interleave(torch.arange(len(features)), counts)
        if "labels" in features[0]:
            batch["labels"] = torch.tensor([feature["labels"] for feature in features])
        return batch


def is_document_model(model) -> bool:
    """A model that pools windows itself (also under int8 quantization, which keeps the class)."""
    return isinstance(model, BertkitForDocumentClassification)


@torch.inference_mode()
def document_logits(model: BertkitForDocumentClassification, tokenizer, features: list[dict], doc_ids: np.ndarray,
                    max_tokens: int, max_rows: int, advance: Callable[[int], None] | None = None) -> np.ndarray:
    """(D, C) logits of the documents whose windows are `features` (window i of document doc_ids[i]): the windows
    run through the encoder in length-sorted batches of at most max_tokens padded tokens, their pooled vectors are
    gathered in input order, then each document's vectors are pooled by the model's attention."""
    vectors = [None] * len(features)
    for indices in token_budget_batches([len(f["input_ids"]) for f in features], max_tokens, max_rows):
        padded = tokenizer.pad([features[i] for i in indices], return_tensors="pt")
        pooled = model.window_vectors(**{key: value.to(model.device) for key, value in padded.items()})
        for row, index in enumerate(indices):
            vectors[index] = pooled[row]
        if advance is not None:
            advance(len(indices))
    document_ids = torch.as_tensor(np.asarray(doc_ids), dtype=torch.long, device=model.device)
    return model.classify_windows(torch.stack(vectors), document_ids).logits.float().cpu().numpy()


__all__ = ["uses_attention", "DocumentCollator", "is_document_model", "document_logits"]
