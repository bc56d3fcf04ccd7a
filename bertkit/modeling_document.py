"""Document classification over a long document's windows: each window is encoded by BERT and pooled as the sequence
head pools it, a small learned attention weighs a document's window vectors (softmax over that document's windows
only), and the weighted sum goes through the sequence head's dropout and classifier (`long_doc.aggregate=attention`).

    input_ids (W, L)   the windows of D documents, flattened; document_ids (W,) = each window's document, 0..D-1
    -> window_vectors (W, H)  -> document_vectors (D, H)  -> classifier -> logits (D, C)

The forward is split so inference need not hold a document's windows in one encoder call: `window_vectors` runs on
token-budget batches of windows (under no_grad), and `classify_windows` pools them afterwards.

Parameter names are those of BertkitForSequenceClassification (`bert.*`, `classifier.*`) plus `window_attention.*`.
Stock transformers loads a saved checkpoint with `BertForSequenceClassification.from_pretrained` (it warns that the
`window_attention.*` weights are unexpected and drops them): that model is a per-window classifier, one prediction
per window, with no pooling across windows. On a document of one window the attention weight is exactly 1, so there
its logits are exactly this model's (tests/test_document_model.py checks it); on longer documents the caller must
combine the windows itself.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from .configuration_bert import BertkitConfig
from .losses import infer_problem_type, sequence_loss
from .modeling_bert import BertkitModel, BertkitPreTrainedModel, _classifier_dropout, _maybe_tuple, mean_pool


class WindowAttention(nn.Module):
    """One score per window vector: Linear(H, H) -> tanh -> Linear(H, 1) (additive attention, Yang et al. 2016)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.score = nn.Linear(hidden_size, 1)

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        return self.score(torch.tanh(self.dense(vectors))).squeeze(-1)  # (W, H) -> (W,)


def segment_softmax(scores: torch.Tensor, segments: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Softmax of `scores` (W,) within each segment (`segments` (W,) in 0..num_segments-1): the weights of one
    segment sum to 1, and a segment of one element gets exactly 1."""
    scores = scores.float()
    top = scores.new_full((num_segments,), float("-inf")).scatter_reduce(0, segments, scores, "amax")
    exp = (scores - top[segments]).exp()
    total = exp.new_zeros(num_segments).index_add(0, segments, exp)
    return exp / total[segments]


def _rows(inputs) -> torch.Tensor:
    return next(tensor for tensor in inputs if tensor is not None)


def _slice(inputs, start: int, count: int) -> tuple:
    """Windows start..start+count of each per-window input (a broadcast (1, L) position_ids stays whole)."""
    total = len(_rows(inputs))
    return tuple(tensor[start:start + count] if tensor is not None and tensor.dim() > 1 and len(tensor) == total
                 else tensor for tensor in inputs)


class BertkitForDocumentClassification(BertkitPreTrainedModel):
    """Single-label, multi-label or regression per document (config.problem_type, or inferred from the labels as
    the sequence head does), from learned attention over the document's window vectors."""

    inference_windows = 64
    """Without gradients (evaluation), forward encodes at most this many windows per encoder call: a batch counts
    documents, and per_device_eval_batch_size documents of up to max_windows windows each can be many windows."""

    def __init__(self, config: BertkitConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = BertkitModel(config, add_pooling_layer=config.classifier_pooling == "cls")
        self.dropout = _classifier_dropout(config)
        self.window_attention = WindowAttention(config.hidden_size)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def window_vectors(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                       inputs_embeds=None, **kwargs) -> torch.Tensor:
        """Each window pooled as the sequence head pools a sequence ([CLS] pooler, or masked mean): (W, L) -> (W, H)."""
        encoded = self.bert.encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)
        if self.config.classifier_pooling == "mean":
            return mean_pool(encoded.padded(), attention_mask)
        return self.bert.pooler(encoded.first_tokens())

    def document_vectors(self, window_vectors: torch.Tensor, document_ids: torch.Tensor,
                         num_documents: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(W, H) window vectors -> (D, H) attention-weighted sums per document, and the (W,) weights."""
        document_ids = document_ids.to(window_vectors.device).long()
        if num_documents is None:
            num_documents = int(document_ids.max()) + 1 if len(document_ids) else 0
        weights = segment_softmax(self.window_attention(window_vectors), document_ids, num_documents)
        weighted = window_vectors * weights.to(window_vectors.dtype).unsqueeze(-1)
        return window_vectors.new_zeros(num_documents, window_vectors.shape[-1]).index_add(0, document_ids,
                                                                                           weighted), weights

    def classify_windows(self, window_vectors: torch.Tensor, document_ids: torch.Tensor, labels=None,
                         num_items_in_batch=None) -> SequenceClassifierOutput:
        """Pooled window vectors -> document logits (D, C) and, with labels (D,) or (D, C), the loss per document
        (summed and divided by num_items_in_batch when Trainer gives it: exact under gradient accumulation)."""
        num_documents = len(labels) if labels is not None else None
        documents, _ = self.document_vectors(window_vectors, document_ids, num_documents)
        logits = self.classifier(self.dropout(documents))  # (D, num_labels)
        loss = None
        if labels is not None:
            self.config.problem_type = infer_problem_type(self.config, labels)
            loss = sequence_loss(logits, labels, self.config.problem_type, num_items_in_batch)
        return SequenceClassifierOutput(loss=loss, logits=logits)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, document_ids=None, labels=None,
                position_ids=None, inputs_embeds=None, return_dict=None, **kwargs) -> SequenceClassifierOutput:
        """Windows (W, L) of the batch's documents -> document logits (D, C). Without document_ids every window is
        its own document (what stock BertForSequenceClassification computes)."""
        num_items_in_batch = kwargs.pop("num_items_in_batch", None)
        inputs = (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
        if torch.is_grad_enabled() or len(_rows(inputs)) <= self.inference_windows:
            vectors = self.window_vectors(*inputs, **kwargs)
        else:  # evaluation: a batch of documents may hold many windows; encode them a slice at a time
            vectors = torch.cat([self.window_vectors(*_slice(inputs, start, self.inference_windows), **kwargs)
                                 for start in range(0, len(_rows(inputs)), self.inference_windows)])
        if document_ids is None:
            document_ids = torch.arange(len(vectors), device=vectors.device)
        output = self.classify_windows(vectors, document_ids, labels, num_items_in_batch)
        return _maybe_tuple(output, return_dict, self.config)


__all__ = ["WindowAttention", "segment_softmax", "BertkitForDocumentClassification"]
